package metricsauth

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

type fakeAuthn struct {
	ok  bool
	err error
}

func (f fakeAuthn) AuthenticateRequest(*http.Request) (*authenticator.Response, bool, error) {
	if !f.ok {
		return nil, false, f.err
	}
	return &authenticator.Response{User: &user.DefaultInfo{Name: "system:serviceaccount:ns:scraper"}}, true, nil
}

type fakeAuthz struct {
	d   authorizer.Decision
	err error
}

func (f fakeAuthz) Authorize(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
	return f.d, "because", f.err
}

// TestHandler: each outcome of the reviews gives its status and at most one
// log line, an error line only when a review could not be made.
func TestHandler(t *testing.T) {
	allow := fakeAuthz{d: authorizer.DecisionAllow}
	for _, c := range []struct {
		name      string
		authn     fakeAuthn
		authz     fakeAuthz
		status    int
		lines     int
		errorLine bool
	}{
		{"refused token", fakeAuthn{err: errors.New("[invalid bearer token, square/go-jose: compact JWS format must have three parts]")}, allow, 401, 1, false},
		{"no token", fakeAuthn{}, allow, 401, 0, false},
		{"API server unreachable", fakeAuthn{err: &url.Error{Op: "Post", URL: "https://10.0.0.1/apis", Err: errors.New("connection refused")}}, allow, 503, 1, true},
		{"review forbidden", fakeAuthn{err: apierrors.NewForbidden(schema.GroupResource{Resource: "tokenreviews"}, "", errors.New("no"))}, allow, 503, 1, true},
		{"review timed out", fakeAuthn{err: context.DeadlineExceeded}, allow, 503, 1, true},
		{"allowed", fakeAuthn{ok: true}, allow, 200, 0, false},
		{"denied", fakeAuthn{ok: true}, fakeAuthz{d: authorizer.DecisionDeny}, 403, 0, false},
		{"authorization failed", fakeAuthn{ok: true}, fakeAuthz{err: errors.New("boom")}, 500, 1, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var lines []string
			log := funcr.New(func(prefix, args string) { lines = append(lines, prefix+" "+args) }, funcr.Options{})
			h := handler(log, c.authn, c.authz, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(200) }))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
			if rec.Code != c.status {
				t.Errorf("status %d, want %d", rec.Code, c.status)
			}
			errorLines := 0
			for _, l := range lines {
				if strings.Contains(l, `"error"=`) {
					errorLines++
				}
				if strings.Contains(l, "\n") {
					t.Errorf("a log entry of more than one line: %q", l)
				}
			}
			if len(lines) != c.lines || (errorLines > 0) != c.errorLine {
				t.Errorf("%d log lines (%d errors), want %d (error: %v): %q", len(lines), errorLines, c.lines, c.errorLine, lines)
			}
		})
	}
}
