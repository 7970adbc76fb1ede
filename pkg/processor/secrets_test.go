package processor

import (
	"slices"
	"testing"
)

func TestCredentialSecrets(t *testing.T) {
	tests := []struct {
		name    string
		headers map[string]string
		want    []string
	}{
		{"credential headers only, short values left", map[string]string{
			"authorization": "Bearer abcdefgh123", "x-api-key": "k-1234567890", "cookie": "a=b",
			"x-user": "alice-the-admin", "proxy-authorization": "Basic dXNlcjpwYXNz",
		}, []string{"Bearer abcdefgh123", "abcdefgh123", "Basic dXNlcjpwYXNz", "dXNlcjpwYXNz", "k-1234567890"}},
		{"authorization sent twice, joined", map[string]string{
			"authorization": "Bearer firsttoken123, Bearer secondtoken456",
		}, []string{"Bearer firsttoken123, Bearer secondtoken456", "Bearer firsttoken123", "firsttoken123",
			"Bearer secondtoken456", "secondtoken456"}},
		{"cookies, each value", map[string]string{
			"cookie": "session=verysecretvalue; csrf=anothersecret",
		}, []string{"session=verysecretvalue; csrf=anothersecret", "session=verysecretvalue", "verysecretvalue",
			"csrf=anothersecret", "anothersecret"}},
	}
	for _, tt := range tests {
		got := credentialSecrets(tt.headers)
		slices.Sort(got)
		slices.Sort(tt.want)
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: credentialSecrets = %q, want %q", tt.name, got, tt.want)
		}
	}
}
