package pipeline

import (
	"bytes"
	"encoding/json"
	"strings"
	"text/template"
	"text/template/parse"
)

// InputReadsPayload reports whether a step's input has a template that may
// read the payload: one that names .payload, or uses the data whole (.,
// $) where it could reach it. It may over-report, never under-report.
func InputReadsPayload(input json.RawMessage) bool {
	if !bytes.Contains(input, []byte("{{")) {
		return false
	}
	var v any
	if err := json.Unmarshal(input, &v); err != nil {
		return false // rendering fails on its own
	}
	reads := false
	walkStrings(v, "", func(_, s string) error {
		if !reads && strings.Contains(s, "{{") {
			reads = templateReadsPayload(s)
		}
		return nil
	})
	return reads
}

// templateReadsPayload reports whether template text s may read .payload.
func templateReadsPayload(s string) bool {
	t, err := template.New("").Funcs(templateFuncs).Parse(s)
	if err != nil || t.Tree == nil {
		return false // rendering fails on its own
	}
	return nodeReadsPayload(t.Tree.Root)
}

// branchReadsPayload is nodeReadsPayload for an if, range or with.
func branchReadsPayload(b *parse.BranchNode) bool {
	return nodeReadsPayload(b.Pipe) || nodeReadsPayload(b.List) || nodeReadsPayload(b.ElseList)
}

func nodeReadsPayload(n parse.Node) bool {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return false
		}
		for _, c := range n.Nodes {
			if nodeReadsPayload(c) {
				return true
			}
		}
	case *parse.ActionNode:
		return nodeReadsPayload(n.Pipe)
	case *parse.IfNode:
		return branchReadsPayload(&n.BranchNode)
	case *parse.RangeNode:
		return branchReadsPayload(&n.BranchNode)
	case *parse.WithNode:
		return branchReadsPayload(&n.BranchNode)
	case *parse.TemplateNode:
		return nodeReadsPayload(n.Pipe)
	case *parse.PipeNode:
		if n == nil {
			return false
		}
		for _, c := range n.Cmds {
			if nodeReadsPayload(c) {
				return true
			}
		}
	case *parse.CommandNode:
		for _, a := range n.Args {
			if nodeReadsPayload(a) {
				return true
			}
		}
	case *parse.ChainNode:
		return nodeReadsPayload(n.Node) || n.Field[0] == "payload"
	case *parse.FieldNode:
		return n.Ident[0] == "payload"
	case *parse.DotNode, *parse.VariableNode:
		// The data whole, or a variable that may hold it.
		return true
	}
	return false
}
