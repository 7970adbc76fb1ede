package processor

import (
	"slices"
	"testing"
)

func TestCredentialSecrets(t *testing.T) {
	got := credentialSecrets(map[string]string{
		"authorization": "Bearer abcdefgh123", "x-api-key": "k-1234567890", "cookie": "a=b",
		"x-user": "alice-the-admin", "proxy-authorization": "Basic dXNlcjpwYXNz",
	})
	want := []string{"Bearer abcdefgh123", "abcdefgh123", "Basic dXNlcjpwYXNz", "dXNlcjpwYXNz", "k-1234567890"}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("credentialSecrets = %q, want %q (credential headers only, short values left)", got, want)
	}
}
