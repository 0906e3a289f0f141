package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// keysCmd implements "triggerctl keys list|create|revoke": the tenant's
// own API keys, so that a key can be rotated and a leaked one revoked.
func keysCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var name *string
	synopsis := "usage: triggerctl keys list | create --name NAME | revoke KEY_ID\n\n" +
		"The tenant's API keys. To rotate the key in use: create a new one, switch clients to it\n" +
		"(TRIGGERD_API_KEY), then revoke the old one, which is refused from its next request on.\n" +
		"create prints the new key once: it cannot be shown again. list shows ids, names and\n" +
		"creation times, never keys. The tenant's last key cannot be revoked: create another first."
	define := func(fs *flag.FlagSet) {
		name = fs.String("name", "", "create: the new key's name, to tell it from the others (such as where it is used)")
	}
	// action is what route decided, for the note after a success.
	var action, keyID string
	route := func(fs *flag.FlagSet) (request, error) {
		a := fs.Args()
		switch {
		case len(a) == 1 && a[0] == "list":
			return request{http.MethodGet, "/keys", nil}, nil
		case len(a) == 1 && a[0] == "create":
			if *name == "" {
				return request{}, errors.New("create needs --name NAME: a name that tells the key from the tenant's others, such as where it is used")
			}
			action = "create"
			return request{http.MethodPost, "/keys", map[string]string{"name": *name}}, nil
		case len(a) == 2 && a[0] == "revoke":
			action, keyID = "revoke", a[1]
			return request{http.MethodDelete, "/keys/" + url.PathEscape(a[1]), nil}, nil
		}
		return request{}, errors.New("want: keys list | create --name NAME | revoke KEY_ID")
	}
	code := apiCommand(ctx, "keys", synopsis, args, stdout, stderr, define, route)
	if code != 0 {
		return code
	}
	switch action {
	case "create":
		fmt.Fprintln(stderr, "triggerctl keys: the api_key above is shown only now and will not be shown again: store it, switch your clients to it, then revoke the old key")
	case "revoke":
		fmt.Fprintf(stderr, "triggerctl keys: revoked %s; requests with it are refused from now on\n", keyID)
	}
	return 0
}
