package main

import (
	"strings"
	"testing"
)

func TestCheckTailFilter(t *testing.T) {
	for _, ok := range []string{
		"", "triggers.>", ">", "triggers.codehost.>", "triggers.*.*.octo-org.api", "triggers.codehost.new_issue.octo-org.socket%2Eio",
		"triggers.deploy.deployment_failed.team_4FWx4KQJ.>", "*.codehost.new_issue.*.*",
	} {
		if err := checkTailFilter(ok); err != nil {
			t.Errorf("checkTailFilter(%q) = %v, want nil", ok, err)
		}
	}
	for filter, want := range map[string]string{
		"triggers..x":                                      "empty token",
		"triggers.>.codehost":                              "only be the last",
		"foo.bar":                                          "matches no event",
		"deliveries.>":                                     "matches no event",
		"triggers.codehost":                                "5 tokens",
		"triggers.codehost.new_issue.a.b.c":                "5 tokens",
		"triggers.mail.>":                                  `no connector "mail"`,
		"triggers.codehost.new_isue.>":                     `no trigger kind "new_isue"`,
		"triggers.deploy.new_issue.>":                      "is a codehost kind",
		"triggers.codehost.new_issue.Octo-Org.>":           `use "triggers.codehost.new_issue.octo-org.>"`,
		"triggers.codehost.new_issue.octo-org.Socket%2EIO": `use "triggers.codehost.new_issue.octo-org.socket%2Eio"`,
	} {
		err := checkTailFilter(filter)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("checkTailFilter(%q) = %v, want an error containing %q", filter, err, want)
		}
	}
}
