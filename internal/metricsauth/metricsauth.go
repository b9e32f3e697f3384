// Package metricsauth is the filter in front of the agent's and the
// operator's /metrics with --metrics-secure: a bearer token, reviewed by
// the API server (TokenReview), whose user may get /metrics
// (SubjectAccessReview).
//
// It is controller-runtime's filters.WithAuthenticationAndAuthorization
// (same authenticator and authorizer, same caches and retries) but for
// one thing: controller-runtime answers every authentication error with
// 500 and an error-level log entry (a stack trace in development logging),
// and a token the API server reviews and refuses with a reason (a
// malformed or expired token: "invalid bearer token, ...") is such an
// error. Here that is 401 with one info line. Only a review that could not
// be made (the API server unreachable or refusing the review itself) is
// an error: 503 and one error entry.
package metricsauth

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	authenticationv1 "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// backoff is the reviews' retry backoff, as controller-runtime's (copied
// from k8s.io/apiserver's DefaultAuthWebhookRetryBackoff).
func backoff() *wait.Backoff {
	return &wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}
}

// Provider returns a metricsserver.Options.FilterProvider whose filter
// logs to log (the manager's logger, named "metrics"). Errors: the review
// clients or the authenticator and authorizer could not be built from the
// config.
func Provider(log logr.Logger) func(*rest.Config, *http.Client) (metricsserver.Filter, error) {
	log = log.WithName("metrics")
	return func(config *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
		authnClient, err := authenticationv1.NewForConfigAndClient(config, httpClient)
		if err != nil {
			return nil, err
		}
		authzClient, err := authorizationv1.NewForConfigAndClient(config, httpClient)
		if err != nil {
			return nil, err
		}
		authn, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{
			Anonymous:                &apiserver.AnonymousAuthConfig{Enabled: false},
			CacheTTL:                 time.Minute,
			TokenAccessReviewClient:  authnClient,
			TokenAccessReviewTimeout: 10 * time.Second,
			WebhookRetryBackoff:      backoff(),
		}.New()
		if err != nil {
			return nil, fmt.Errorf("metrics authenticator: %w", err)
		}
		authz, err := authorizerfactory.DelegatingAuthorizerConfig{
			SubjectAccessReviewClient: authzClient,
			AllowCacheTTL:             5 * time.Minute,
			DenyCacheTTL:              30 * time.Second,
			WebhookRetryBackoff:       backoff(),
		}.New()
		if err != nil {
			return nil, fmt.Errorf("metrics authorizer: %w", err)
		}
		return func(_ logr.Logger, next http.Handler) (http.Handler, error) {
			return handler(log, authn, authz, next), nil
		}, nil
	}
}

// authorize is the part of authorizer.Authorizer handler uses.
type authorize interface {
	Authorize(context.Context, authorizer.Attributes) (authorizer.Decision, string, error)
}

// handler authenticates and authorizes each request before next serves
// it: 401 for a missing or refused token (one info line for a refused
// one), 503 when the token could not be reviewed, 403 for a user who may
// not get the path, 500 when the authorization could not be reviewed.
func handler(log logr.Logger, authn authenticator.Request, authz authorize, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		res, ok, err := authn.AuthenticateRequest(req)
		switch {
		case err != nil && unavailable(err):
			log.Error(err, "cannot review the request's token", "remote", req.RemoteAddr)
			http.Error(w, "Authentication unavailable", http.StatusServiceUnavailable)
			return
		case err != nil:
			log.Info("request refused: its bearer token is not valid", "remote", req.RemoteAddr, "reason", oneLine(err.Error()))
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		case !ok:
			log.V(4).Info("request refused: no bearer token", "remote", req.RemoteAddr)
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		attrs := authorizer.AttributesRecord{User: res.User, Verb: strings.ToLower(req.Method), Path: req.URL.Path}
		decision, reason, err := authz.Authorize(req.Context(), attrs)
		if err != nil {
			msg := fmt.Sprintf("Authorization for user %s failed", attrs.User.GetName())
			log.Error(err, msg)
			http.Error(w, msg, http.StatusInternalServerError)
			return
		}
		if decision != authorizer.DecisionAllow {
			msg := fmt.Sprintf("Authorization denied for user %s", attrs.User.GetName())
			log.V(4).Info(msg, "reason", reason)
			http.Error(w, msg, http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, req)
	})
}

// unavailable reports whether err says the token could not be reviewed
// (the API server unreachable, timing out, or refusing the TokenReview
// itself), as opposed to a review that refused the token.
func unavailable(err error) bool {
	var status apierrors.APIStatus
	var uerr *url.Error
	var nerr net.Error
	return errors.As(err, &status) || errors.As(err, &uerr) || errors.As(err, &nerr) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// oneLine folds a multi-line message onto one line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
