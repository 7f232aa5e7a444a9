package locker_test

import (
	"errors"
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

func TestMustParseNamePanicsOnABadTemplate(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("MustParseName did not panic on a bad template")
		}
	}()
	locker.MustParseName("{{")
}
