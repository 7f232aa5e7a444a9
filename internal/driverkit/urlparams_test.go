package driverkit

import (
	"slices"
	"strings"
	"testing"
)

func TestHosts(t *testing.T) {
	tests := []struct {
		list    string
		want    []string
		wantErr string
	}{
		{list: "a", want: []string{"a:99"}},
		{list: "a:1,b", want: []string{"a:1", "b:99"}},
		{list: "[::1]:5,[::2]", want: []string{"[::1]:5", "[::2]:99"}},
		{list: "", wantErr: "no host"},
		{list: "a,,b", wantErr: "empty host in"},
		{list: "::1", wantErr: "bad host"},
		{list: ":5", wantErr: "empty host name"},
		{list: "a:0", wantErr: "bad port"},
		{list: "a:70000", wantErr: "bad port"},
		{list: "a:x", wantErr: "bad port"},
		{list: "a,a:99", wantErr: "given twice"},
	}
	for _, tt := range tests {
		got, err := Hosts(tt.list, "99")
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Hosts(%q) = %v, %v; want an error with %q", tt.list, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("Hosts(%q) = %v, %v; want %v", tt.list, got, err, tt.want)
		}
	}
}

func TestQuery(t *testing.T) {
	known := []string{"a", "b"}
	q, keys, err := Query("b=2&a=1", known)
	if err != nil || !slices.Equal(keys, []string{"a", "b"}) || q.Get("b") != "2" {
		t.Errorf("Query = %v, %v, %v", q, keys, err)
	}
	for raw, want := range map[string]string{
		"c=1":     `unknown parameter "c" (known: a, b)`,
		"a=1&a=2": `parameter "a" given 2 times`,
		"a=%zz":   "bad query",
	} {
		if _, _, err := Query(raw, known); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Query(%q) = %v, want %q", raw, err, want)
		}
	}
}

func FuzzHosts(f *testing.F) {
	for _, s := range []string{"a", "a:1,b", "[::1]:5", ",", "a:99999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, list string) {
		addrs, err := Hosts(list, "1")
		if err == nil && len(addrs) == 0 {
			t.Errorf("Hosts(%q) gave no address and no error", list)
		}
	})
}
