package locker_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/golocker/locker"
)

func TestNameTemplate(t *testing.T) {
	type order struct {
		ID       int
		Customer struct{ Name string }
	}
	var o order
	o.ID = 42
	o.Customer.Name = "ada"
	tests := []struct {
		name, tmpl string
		value      any
		want       string
		wantErr    error // nil: no error
		parseErr   bool
	}{
		{name: "a field", tmpl: "order:{{.ID}}", value: o, want: "order:42"},
		{name: "a nested field", tmpl: "customer/{{.Customer.Name}}/order/{{.ID}}", value: o, want: "customer/ada/order/42"},
		{name: "a map key", tmpl: "tenant/{{.tenant}}", value: map[string]string{"tenant": "t1"}, want: "tenant/t1"},
		{name: "a missing map key is an error, not <no value>", tmpl: "tenant/{{.tenant}}", value: map[string]string{}, wantErr: locker.ErrInvalidName},
		{name: "a missing field is an error", tmpl: "order:{{.Number}}", value: o, wantErr: locker.ErrInvalidName},
		{name: "an empty result is an invalid name", tmpl: "{{.}}", value: "", wantErr: locker.ErrInvalidName},
		{name: "a result too long is an invalid name", tmpl: "{{.}}", value: strings.Repeat("x", 600), wantErr: locker.ErrInvalidName},
		{name: "a bad template fails to parse", tmpl: "order:{{.ID", parseErr: true},
		{name: "an empty field is refused, not shared by every such value", tmpl: "customer/{{.Customer.Name}}/order/{{.ID}}", value: order{ID: 1}, wantErr: locker.ErrInvalidName},
		{name: "an empty map value is refused", tmpl: "tenant/{{.tenant}}", value: map[string]string{"tenant": ""}, wantErr: locker.ErrInvalidName},
		{name: "an empty value inside if is refused", tmpl: "t/{{if .ok}}{{.v}}{{end}}", value: map[string]any{"ok": true, "v": ""}, wantErr: locker.ErrInvalidName},
		{name: "a variable declaration prints nothing and is fine", tmpl: "{{$id := .ID}}order:{{$id}}", value: o, want: "order:42"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nt, err := locker.ParseName(tt.tmpl)
			if tt.parseErr {
				if err == nil || !strings.Contains(err.Error(), tt.tmpl) {
					t.Fatalf("ParseName(%q) = %v, want an error naming the template", tt.tmpl, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseName: %v", err)
			}
			got, err := nt.Name(tt.value)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Name = %q, %v; want %v", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Name = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestNameTemplateAllowEmptyValues(t *testing.T) {
	nt, err := locker.ParseName("tenant/{{.tenant}}/x", locker.AllowEmptyValues())
	if err != nil {
		t.Fatal(err)
	}
	if got, err := nt.Name(map[string]string{"tenant": ""}); err != nil || got != "tenant//x" {
		t.Errorf("Name = %q, %v; want tenant//x with AllowEmptyValues", got, err)
	}
	if err != nil || !strings.Contains(fmt.Sprint(locker.MustParseName("a/{{.}}").Name("")), "AllowEmptyValues") {
		t.Error("the error of an empty value does not point to AllowEmptyValues")
	}
}

func TestMustParseNamePanicsOnABadTemplate(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("MustParseName did not panic on a bad template")
		}
	}()
	locker.MustParseName("{{")
}
