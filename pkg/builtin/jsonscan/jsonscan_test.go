package jsonscan

import (
	"errors"
	"strings"
	"testing"
)

func TestRewrite(t *testing.T) {
	upper := func(_ []string, s string) (string, bool) {
		if strings.Contains(s, "x") {
			return strings.ToUpper(s), true
		}
		return "", false
	}
	tests := []struct {
		name, in, member, want string
		changed                bool
	}{
		{"untouched", `{"args": {"a": "y"}, "name": "x"}`, "args", `{"args": {"a": "y"}, "name": "x"}`, false},
		{"member only", `{"name": "x", "args": {"a": "x1", "b": ["x2", 3, "q"]}}`, "args", `{"name": "x", "args": {"a": "X1", "b": ["X2", 3, "q"]}}`, true},
		{"names are not values", `{"args": {"x": 1}}`, "args", `{"args": {"x": 1}}`, false},
		{"escapes", `{"args": {"a": "x\u0041\"q"}}`, "args", `{"args": {"a": "XA\"Q"}}`, true},
		{"whole", `["x", {"k": "x"}]`, "", `["X", {"k": "X"}]`, true},
		{"absent member", `{"name": "x"}`, "args", `{"name": "x"}`, false},
		{"top-level string member", `{"args": "xy"}`, "args", `{"args": "XY"}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, changed, err := Walker{}.Rewrite([]byte(tt.in), tt.member, upper)
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tt.want || changed != tt.changed {
				t.Errorf("got %s (changed %v), want %s (%v)", out, changed, tt.want, tt.changed)
			}
		})
	}
}

func TestPaths(t *testing.T) {
	var got []string
	_, _, err := Walker{Paths: true}.Rewrite([]byte(`{"args": {"a": {"b": ["s1", {"c": "s2"}]}, "d": "s3"}}`), "args",
		func(p []string, s string) (string, bool) {
			got = append(got, strings.Join(p, ".")+"="+s)
			return "", false
		})
	if err != nil {
		t.Fatal(err)
	}
	if want := "a.b=s1 a.b.c=s2 d=s3"; strings.Join(got, " ") != want {
		t.Errorf("paths %q, want %q", strings.Join(got, " "), want)
	}
}

func TestIndexes(t *testing.T) {
	var got []string
	_, _, err := Walker{Paths: true, Indexes: true}.Rewrite([]byte(`{"a": [["s1"], {"c": "s2"}]}`), "",
		func(p []string, s string) (string, bool) {
			got = append(got, strings.Join(p, "")+"="+s)
			return "", false
		})
	if err != nil {
		t.Fatal(err)
	}
	if want := "a[0][0]=s1 a[1]c=s2"; strings.Join(got, " ") != want {
		t.Errorf("paths %q, want %q", strings.Join(got, " "), want)
	}
}

func TestLimits(t *testing.T) {
	none := func([]string, string) (string, bool) { return "", false }
	tests := []struct {
		w  Walker
		in string
	}{
		{Walker{MaxDepth: 2}, `[[["deep"]]]`},
		{Walker{MaxItems: 2}, `{"a": 1, "b": 2, "c": 3}`},
	}
	for _, tt := range tests {
		if _, _, err := tt.w.Rewrite([]byte(tt.in), "", none); !errors.Is(err, ErrLimit) {
			t.Errorf("%s: err %v, want ErrLimit", tt.in, err)
		}
	}
	if _, _, err := (Walker{MaxDepth: 3, MaxItems: 3}).Rewrite([]byte(`[[["ok"]], 1, 2]`), "", none); err != nil {
		t.Errorf("within limits: %v", err)
	}
	if _, _, err := (Walker{}).Rewrite([]byte(`{"args": [1,`), "args", none); err == nil {
		t.Error("truncated JSON: no error")
	}
}

func TestMember(t *testing.T) {
	tests := []struct {
		in, name, want string
		ok             bool
	}{
		{`{"args": {"name": "no"}, "name": "search"}`, "name", "search", true},
		{`{"prompt_id": "p\u0031"}`, "prompt_id", "p1", true},
		{`{"name": 3}`, "name", "", false},
		{`{"other": "x"}`, "name", "", false},
	}
	for _, tt := range tests {
		got, ok, err := Member([]byte(tt.in), tt.name)
		if err != nil || got != tt.want || ok != tt.ok {
			t.Errorf("Member(%s, %s) = %q, %v, %v; want %q, %v", tt.in, tt.name, got, ok, err, tt.want, tt.ok)
		}
	}
	if _, _, err := Member([]byte(`[1]`), "name"); err == nil {
		t.Error("an array: no error")
	}
}

func TestDuplicateNames(t *testing.T) {
	none := func([]string, string) (string, bool) { return "", false }
	for _, in := range []string{`{"args":{"a":"x"},"args":{"a":"y"}}`, `{"args":{"a":"x","a":"y"}}`} {
		if _, _, err := (Walker{}).Rewrite([]byte(in), "args", none); err == nil {
			t.Errorf("%s: no error", in)
		}
	}
}
