package cluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeenv "github.com/shadowtune/shadowtune/internal/testutil/envtest"
)

// TestMetricsSecureOnAPIServer starts the agent's manager with
// MetricsSecure on a loopback port against a real API server: a scrape of
// /metrics without a token is refused (401), one with the token of a
// ServiceAccount that may not get /metrics is refused (403), and one with
// the token of a ServiceAccount bound to a metrics-reader role (get on the
// non-resource URL /metrics, as the chart's metrics-rbac.yaml grants)
// succeeds.
func TestMetricsSecureOnAPIServer(t *testing.T) {
	env := kubeenv.StartEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	admin := env.Client

	const ns = "metrics-test"
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	for _, o := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "scraper", Namespace: ns}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "stranger", Namespace: ns}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "test-metrics-reader"},
			Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "test-metrics-reader"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "test-metrics-reader"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "scraper", Namespace: ns}}},
	} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	token := func(sa string) string {
		t.Helper()
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	scraper, stranger := token("scraper"), token("stranger")

	addr := freeLoopbackAddr(t)
	logs := &lineLog{}
	mgr, err := NewManager(env.Config, ManagerOptions{NodeName: "node-a", MetricsBindAddress: addr, MetricsSecure: true,
		Logger: funcr.New(logs.add, funcr.Options{Verbosity: 1})})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}()

	// The serving certificate is self-signed: only the filter is tested.
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // a self-signed test server
	get := func(tok string) (int, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/metrics", nil)
		if err != nil {
			return 0, err
		}
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := get("")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the metrics endpoint on %s does not answer: %v", addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// A malformed token (issue 44): 401 and one log line, not an error
	// with a stack trace and a 500 (controller-runtime's filter answers a
	// TokenReview that refuses the token with a reason so).
	for _, tok := range []string{"not-a-token", "a.b.c", "Bearer x"} {
		before := logs.len()
		code, err := get(tok)
		lines := logs.since(before)
		if err != nil || code != http.StatusUnauthorized {
			t.Errorf("GET /metrics with the malformed token %q: status %d, %v; want 401", tok, code, err)
		}
		if len(lines) != 1 || strings.Contains(lines[0], `"error"=`) {
			t.Errorf("GET /metrics with the malformed token %q logged %d lines, want one that is not an error:\n%s",
				tok, len(lines), strings.Join(lines, "\n"))
		}
		t.Logf("%q: %d, %s", tok, code, strings.Join(lines, "\n"))
	}
	for _, c := range []struct {
		who, tok string
		want     int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"a ServiceAccount without the metrics-reader role", stranger, http.StatusForbidden},
		{"a ServiceAccount bound to the metrics-reader role", scraper, http.StatusOK},
	} {
		code, err := get(c.tok)
		if err != nil {
			t.Errorf("GET /metrics with %s: %v", c.who, err)
		} else if code != c.want {
			t.Errorf("GET /metrics with %s: status %d, want %d", c.who, code, c.want)
		}
	}
}

// freeLoopbackAddr returns 127.0.0.1:PORT with a port free a moment ago.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return fmt.Sprintf("127.0.0.1:%d", l.Addr().(*net.TCPAddr).Port)
}

// lineLog keeps the lines a funcr logger writes.
type lineLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *lineLog) add(prefix, args string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, prefix+" "+args)
}

func (l *lineLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.lines)
}

// since returns the lines from the n-th on, of the filter's logger only
// ("metrics" in the name).
func (l *lineLog) since(n int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines[n:] {
		if strings.Contains(line, "metrics") {
			out = append(out, line)
		}
	}
	return out
}
