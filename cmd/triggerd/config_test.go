package main

import (
	"io"
	"testing"
)

func TestGCPercent(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		env    map[string]string
		want   int
		wantOK bool
	}{
		{"default", nil, nil, defaultGCPercent, true},
		{"flag", []string{"--gc-percent", "150"}, nil, 150, true},
		{"variable", nil, map[string]string{"TRIGGERD_GC_PERCENT": "-1"}, -1, true},
		{"GOGC wins", []string{"--gc-percent", "150"}, map[string]string{"GOGC": "50"}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lookup := func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }
			cfg, _, err := parseConfig(tc.args, lookup, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if got, ok := gcPercent(cfg, lookup); got != tc.want || ok != tc.wantOK {
				t.Errorf("gcPercent = %d, %v; want %d, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}
