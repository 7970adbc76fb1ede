package main

import (
	"io"
	"testing"
)

func TestTokenFlag(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		plugins int
		wantErr bool
	}{
		{args: nil},
		{args: []string{"--token", "t1=alice@example.com", "--token", "t2=bob@example.com"}, plugins: 1},
		{args: []string{"--token", "novalue"}, wantErr: true},
		{args: []string{"--token", "=alice@example.com"}, wantErr: true},
		{args: []string{"--token", "t1="}, wantErr: true},
	} {
		o, err := parseFlags(tc.args, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		ps, err := o.tokenCheck()
		if (err != nil) != tc.wantErr || len(ps) != tc.plugins {
			t.Errorf("%q: %d plugins, err %v", tc.args, len(ps), err)
		}
		if len(ps) == 1 && ps[0].Name() != "TokenCheck" {
			t.Errorf("plugin %q", ps[0].Name())
		}
	}
}
