package v1alpha1_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/shadowtune/shadowtune/api/v1alpha1"
	kubeenv "github.com/shadowtune/shadowtune/internal/testutil/envtest"
)

// TestAPIServer runs the validation tables against a real kube-apiserver
// with the generated CRDs installed: every invalid StorageTuning is refused
// with its field path and message, and every valid one is accepted with
// the same defaults as Default.
func TestAPIServer(t *testing.T) {
	_, c := kubeenv.Start(t)
	ctx := context.Background()
	obj := func(t *testing.T, doc, name string) *unstructured.Unstructured {
		t.Helper()
		js, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		// apimachinery's json keeps integers int64 (max: 2^63-1 stays exact).
		if err := utiljson.Unmarshal(js, &u.Object); err != nil {
			t.Fatal(err)
		}
		u.SetName(name)
		return u
	}
	t.Run("rejects", func(t *testing.T) {
		for i, tc := range v1alpha1.InvalidDocsForAPIServer() {
			t.Run(tc.Name, func(t *testing.T) {
				err := c.Create(ctx, obj(t, tc.Doc, fmt.Sprintf("invalid-%d", i)))
				if err == nil {
					t.Fatalf("the API server accepted\n%s", tc.Doc)
				}
				if !apierrors.IsInvalid(err) {
					t.Fatalf("want an Invalid error, got %v", err)
				}
				msg := err.Error()
				t.Logf("API: %s", msg)
				if !strings.Contains(msg, tc.Path+": ") && !strings.Contains(msg, tc.Path+"[") {
					t.Errorf("error does not name %s:\n  %s", tc.Path, msg)
				}
				// Every error of the in-process harness (the wording of the
				// CRD's rules, checked there) is in the real server's answer.
				for _, fe := range v1alpha1.CRDVerdict(t, tc.Doc) {
					if strings.Contains(fe[1], "must be of type") {
						continue // type errors: both say so, in their own words
					}
					if fe[1] != "" && !strings.Contains(msg, fe[1]) {
						t.Errorf("error lacks %s: %q:\n  %s", fe[0], fe[1], msg)
					}
				}
			})
		}
	})
	t.Run("accepts with Default's defaults", func(t *testing.T) {
		i := 0
		for name, doc := range v1alpha1.ValidDocs() {
			i++
			t.Run(name, func(t *testing.T) {
				want, err := v1alpha1.GoVerdict(doc)
				if err != nil {
					t.Fatal(err)
				}
				u := obj(t, doc, fmt.Sprintf("valid-%d", i))
				if err := c.Create(ctx, u); err != nil {
					t.Fatalf("the API server rejected it: %v\n%s", err, doc)
				}
				got := &v1alpha1.StorageTuning{}
				if err := c.Get(ctx, client.ObjectKey{Name: u.GetName()}, got); err != nil {
					t.Fatal(err)
				}
				if !equality.Semantic.DeepEqual(want.Spec, got.Spec) {
					g, _ := json.Marshal(got.Spec)
					w, _ := json.Marshal(want.Spec)
					t.Errorf("defaults differ\nDefault:    %s\nAPI server: %s", w, g)
				}
			})
		}
	})
}
