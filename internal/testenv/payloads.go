package testenv

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Push returns a code-hosting push payload (GitHub's format) with n
// distinct commits to octo-org/octo-repo, all by monalisa: Push(2048) is
// the largest push a payload describes, which the corpus lacks.
func Push(n int) []byte {
	type author struct {
		Name     string `json:"name"`
		Email    string `json:"email"`
		Username string `json:"username"`
	}
	type commit struct {
		ID        string   `json:"id"`
		TreeID    string   `json:"tree_id"`
		Distinct  bool     `json:"distinct"`
		Message   string   `json:"message"`
		Timestamp string   `json:"timestamp"`
		URL       string   `json:"url"`
		Author    author   `json:"author"`
		Committer author   `json:"committer"`
		Added     []string `json:"added"`
		Removed   []string `json:"removed"`
		Modified  []string `json:"modified"`
	}
	commits := make([]commit, n)
	for i := range commits {
		sha := fmt.Sprintf("%040x", i+1)
		a := author{Name: "Mona Lisa", Email: "monalisa@users.noreply.github.com", Username: "monalisa"}
		commits[i] = commit{ID: sha, TreeID: fmt.Sprintf("%040x", 1<<32+i), Distinct: true,
			Message:   fmt.Sprintf("Import batch %d\n\nGenerated.", i),
			Timestamp: "2024-05-06T07:08:09+02:00", URL: "https://github.com/octo-org/octo-repo/commit/" + sha,
			Author: a, Committer: a, Added: []string{}, Removed: []string{}, Modified: []string{fmt.Sprintf("data/%d.csv", i)}}
	}
	payload := map[string]any{
		"ref":     "refs/heads/import",
		"before":  strings.Repeat("0", 40),
		"after":   commits[n-1].ID,
		"created": true, "deleted": false, "forced": false, "base_ref": nil,
		"compare": "https://github.com/octo-org/octo-repo/compare/import",
		"commits": commits, "head_commit": commits[n-1],
		"repository": map[string]any{
			"id": 186853002, "name": "octo-repo", "full_name": "octo-org/octo-repo",
			"owner":      map[string]any{"name": "octo-org", "login": "octo-org", "id": 6811672, "type": "Organization"},
			"html_url":   "https://github.com/octo-org/octo-repo",
			"created_at": 1396343564, "pushed_at": 1714972089,
		},
		"pusher": map[string]any{"name": "monalisa", "email": "monalisa@users.noreply.github.com"},
		"sender": map[string]any{"login": "monalisa", "id": 2154203, "type": "User"},
	}
	b, err := json.Marshal(payload)
	if err != nil {
		panic(err)
	}
	return b
}
