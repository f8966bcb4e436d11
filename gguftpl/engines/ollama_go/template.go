// Ollama's chat-template engine: template/template.go @fb30760996871fa9460115c753afd2c60d4ab0f7 (ollama/ollama,
// MIT), with Go 1.19's standard library in place of maps/slices/levenshtein. Parse, Vars, Identifiers, Execute,
// collate, deleteNode and the template* conversion types are that file's, in its order; only what
// server/prompt.go's renderPrompt reaches is here (no Named, no Subtree, no Suffix/insert path beyond Execute's).

package main

import (
	"encoding/json"
	"errors"
	"io"
	"sort"
	"strings"
	"text/template"
	"text/template/parse"
	"time"
)

// response is the {{ .Response }} node Parse appends to templates that have neither .Messages nor .Response.
var response = parse.ActionNode{
	NodeType: parse.NodeAction,
	Pipe: &parse.PipeNode{
		NodeType: parse.NodePipe,
		Cmds: []*parse.CommandNode{
			{
				NodeType: parse.NodeCommand,
				Args: []parse.Node{
					&parse.FieldNode{
						NodeType: parse.NodeField,
						Ident:    []string{"Response"},
					},
				},
			},
		},
	},
}

var funcs = template.FuncMap{
	"json": func(v any) string {
		b, _ := json.Marshal(v)
		return string(b)
	},
	"currentDate": func(args ...string) string {
		return time.Now().Format("2006-01-02")
	},
	"yesterdayDate": func(args ...string) string {
		return time.Now().AddDate(0, 0, -1).Format("2006-01-02")
	},
	"toTypeScriptType": func(v any) string {
		if param, ok := v.(ToolProperty); ok {
			return param.ToTypeScriptType()
		}
		if param, ok := v.(*ToolProperty); ok && param != nil {
			return param.ToTypeScriptType()
		}
		return "any"
	},
}

// Template is template.Template.
type Template struct {
	*template.Template
	raw string
}

// Parse is template.Parse: missingkey=zero, Ollama's funcs, {{ .Response }} appended when needed.
func Parse(s string) (*Template, error) {
	tmpl := template.New("").Option("missingkey=zero").Funcs(funcs)
	tmpl, err := tmpl.Parse(s)
	if err != nil {
		return nil, err
	}
	t := Template{Template: tmpl, raw: s}
	vars, err := t.Vars()
	if err != nil {
		return nil, err
	}
	if !contains(vars, "messages") && !contains(vars, "response") {
		tmpl.Tree.Root.Nodes = append(tmpl.Tree.Root.Nodes, &response)
	}
	return &t, nil
}

// Vars is Template.Vars: every identifier of every defined template, lowercased, sorted, once each.
func (t *Template) Vars() ([]string, error) {
	var vars []string
	for _, tt := range t.Templates() {
		for _, n := range tt.Root.Nodes {
			v, err := Identifiers(n)
			if err != nil {
				return vars, err
			}
			vars = append(vars, v...)
		}
	}
	set := make(map[string]struct{})
	for _, n := range vars {
		set[strings.ToLower(n)] = struct{}{}
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out, nil
}

// Values is template.Values (Suffix, Prompt and forceLegacy unused by chat: renderPrompt never sets them).
type Values struct {
	Messages   []Message
	Tools      Tools
	Prompt     string
	Suffix     string
	Think      bool
	ThinkLevel string
	IsThinkSet bool
}

// Execute is Template.Execute.
func (t *Template) Execute(w io.Writer, v Values, b *capped) error {
	system, messages := collate(v.Messages)
	vars, err := t.Vars()
	if err != nil {
		return err
	}
	if v.Prompt != "" && v.Suffix != "" {
		return t.Template.Execute(w, map[string]any{
			"Prompt": v.Prompt, "Suffix": v.Suffix, "Response": "",
			"Think": v.Think, "ThinkLevel": v.ThinkLevel, "IsThinkSet": v.IsThinkSet,
		})
	} else if contains(vars, "messages") {
		return t.Template.Execute(w, map[string]any{
			"System":     system,
			"Messages":   convertMessagesForTemplate(messages),
			"Tools":      convertToolsForTemplate(v.Tools),
			"Response":   "",
			"Think":      v.Think,
			"ThinkLevel": v.ThinkLevel,
			"IsThinkSet": v.IsThinkSet,
		})
	}
	return t.executeLegacy(w, v, messages, b)
}

// executeLegacy is the rest of Execute: one execution per system/user/assistant turn into b (which the caller
// caps), then the last turn through a copy of the tree cut at {{ .Response }}.
func (t *Template) executeLegacy(w io.Writer, v Values, messages []*Message, b *capped) error {
	system := ""
	var prompt, response string
	for _, m := range messages {
		execute := func() error {
			if err := t.Template.Execute(b, map[string]any{
				"System": system, "Prompt": prompt, "Response": response,
				"Think": v.Think, "ThinkLevel": v.ThinkLevel, "IsThinkSet": v.IsThinkSet,
			}); err != nil {
				return err
			}
			system, prompt, response = "", "", ""
			return nil
		}
		switch m.Role {
		case "system":
			if prompt != "" || response != "" {
				if err := execute(); err != nil {
					return err
				}
			}
			system = m.Content
		case "user":
			if response != "" {
				if err := execute(); err != nil {
					return err
				}
			}
			prompt = m.Content
		case "assistant":
			response = m.Content
		}
	}

	var cut bool
	nodes := deleteNode(t.Template.Root.Copy(), func(n parse.Node) bool {
		if field, ok := n.(*parse.FieldNode); ok && contains(field.Ident, "Response") {
			cut = true
			return false
		}
		return cut
	})
	tree := parse.Tree{Root: nodes.(*parse.ListNode)}
	if err := template.Must(template.New("").AddParseTree("", &tree)).Execute(b, map[string]any{
		"System": system, "Prompt": prompt, "Response": response,
		"Think": v.Think, "ThinkLevel": v.ThinkLevel, "IsThinkSet": v.IsThinkSet,
	}); err != nil {
		return err
	}
	_, err := io.Copy(w, b)
	return err
}

// collate merges consecutive messages of the same role (tool messages excepted) and gathers the system ones.
func collate(msgs []Message) (string, []*Message) {
	var system []string
	var collated []*Message
	for i := range msgs {
		if msgs[i].Role == "system" {
			system = append(system, msgs[i].Content)
		}
		if len(collated) > 0 && collated[len(collated)-1].Role == msgs[i].Role && msgs[i].Role != "tool" {
			collated[len(collated)-1].Content += "\n\n" + msgs[i].Content
		} else {
			collated = append(collated, &msgs[i])
		}
	}
	return strings.Join(system, "\n\n"), collated
}

type templateTools []templateTool

func (t templateTools) String() string {
	bts, _ := json.Marshal(t)
	return string(bts)
}

type templateArgs map[string]any

func (t templateArgs) String() string {
	if t == nil {
		return "{}"
	}
	bts, _ := json.Marshal(t)
	return string(bts)
}

type templateProperties map[string]ToolProperty

func (t templateProperties) String() string {
	if t == nil {
		return "{}"
	}
	bts, _ := json.Marshal(t)
	return string(bts)
}

func (t templateTool) String() string {
	bts, _ := json.Marshal(t)
	return string(bts)
}

type templateTool struct {
	Type     string               `json:"type"`
	Items    any                  `json:"items,omitempty"`
	Function templateToolFunction `json:"function"`
}

type templateToolFunction struct {
	Name        string                         `json:"name"`
	Description string                         `json:"description"`
	Parameters  templateToolFunctionParameters `json:"parameters"`
}

type templateToolFunctionParameters struct {
	Type       string             `json:"type"`
	Defs       any                `json:"$defs,omitempty"`
	Items      any                `json:"items,omitempty"`
	Required   []string           `json:"required,omitempty"`
	Properties templateProperties `json:"properties"`
}

type templateToolCall struct {
	ID       string
	Function templateToolCallFunction
}

type templateToolCallFunction struct {
	Index     int
	Name      string
	Arguments templateArgs
}

type templateMessage struct {
	Role       string
	Content    string
	Thinking   string
	Images     []ImageData
	ToolCalls  []templateToolCall
	ToolName   string
	ToolCallID string
}

func convertToolsForTemplate(tools Tools) templateTools {
	if tools == nil {
		return nil
	}
	result := make(templateTools, len(tools))
	for i, tool := range tools {
		result[i] = templateTool{
			Type:  tool.Type,
			Items: tool.Items,
			Function: templateToolFunction{
				Name:        tool.Function.Name,
				Description: tool.Function.Description,
				Parameters: templateToolFunctionParameters{
					Type:       tool.Function.Parameters.Type,
					Defs:       tool.Function.Parameters.Defs,
					Items:      tool.Function.Parameters.Items,
					Required:   tool.Function.Parameters.Required,
					Properties: templateProperties(tool.Function.Parameters.Properties.ToMap()),
				},
			},
		}
	}
	return result
}

func convertMessagesForTemplate(messages []*Message) []*templateMessage {
	if messages == nil {
		return nil
	}
	result := make([]*templateMessage, len(messages))
	for i, msg := range messages {
		var toolCalls []templateToolCall
		for _, tc := range msg.ToolCalls {
			toolCalls = append(toolCalls, templateToolCall{
				ID: tc.ID,
				Function: templateToolCallFunction{
					Index:     tc.Function.Index,
					Name:      tc.Function.Name,
					Arguments: templateArgs(tc.Function.Arguments.ToMap()),
				},
			})
		}
		result[i] = &templateMessage{
			Role: msg.Role, Content: msg.Content, Thinking: msg.Thinking, Images: msg.Images,
			ToolCalls: toolCalls, ToolName: msg.ToolName, ToolCallID: msg.ToolCallID,
		}
	}
	return result
}

// Identifiers walks the node tree returning any identifiers it finds along the way.
func Identifiers(n parse.Node) ([]string, error) {
	switch n := n.(type) {
	case *parse.ListNode:
		var names []string
		for _, n := range n.Nodes {
			i, err := Identifiers(n)
			if err != nil {
				return names, err
			}
			names = append(names, i...)
		}
		return names, nil
	case *parse.TemplateNode:
		if n.Pipe == nil {
			return nil, errors.New("undefined template specified")
		}
		return Identifiers(n.Pipe)
	case *parse.ActionNode:
		if n.Pipe == nil {
			return nil, errors.New("undefined action in template")
		}
		return Identifiers(n.Pipe)
	case *parse.BranchNode:
		return branchIdentifiers(n)
	case *parse.IfNode:
		return Identifiers(&n.BranchNode)
	case *parse.RangeNode:
		return Identifiers(&n.BranchNode)
	case *parse.WithNode:
		return Identifiers(&n.BranchNode)
	case *parse.PipeNode:
		var names []string
		for _, c := range n.Cmds {
			for _, a := range c.Args {
				i, err := Identifiers(a)
				if err != nil {
					return names, err
				}
				names = append(names, i...)
			}
		}
		return names, nil
	case *parse.FieldNode:
		return n.Ident, nil
	case *parse.VariableNode:
		return n.Ident, nil
	}
	return nil, nil
}

func branchIdentifiers(n *parse.BranchNode) ([]string, error) {
	if n.Pipe == nil {
		return nil, errors.New("undefined branch")
	}
	names, err := Identifiers(n.Pipe)
	if err != nil {
		return names, err
	}
	for _, n := range []*parse.ListNode{n.List, n.ElseList} {
		if n != nil {
			i, err := Identifiers(n)
			if err != nil {
				return names, err
			}
			names = append(names, i...)
		}
	}
	return names, nil
}

// deleteNode walks the node list and deletes nodes that match the predicate (the {{ .Response }} cut).
func deleteNode(n parse.Node, fn func(parse.Node) bool) parse.Node {
	var walk func(n parse.Node) parse.Node
	walk = func(n parse.Node) parse.Node {
		if fn(n) {
			return nil
		}
		switch t := n.(type) {
		case *parse.ListNode:
			var nodes []parse.Node
			for _, c := range t.Nodes {
				if n := walk(c); n != nil {
					nodes = append(nodes, n)
				}
			}
			t.Nodes = nodes
			return t
		case *parse.IfNode:
			t.BranchNode = *walk(&t.BranchNode).(*parse.BranchNode)
		case *parse.WithNode:
			t.BranchNode = *walk(&t.BranchNode).(*parse.BranchNode)
		case *parse.RangeNode:
			t.BranchNode = *walk(&t.BranchNode).(*parse.BranchNode)
		case *parse.BranchNode:
			t.List = walk(t.List).(*parse.ListNode)
			if t.ElseList != nil {
				t.ElseList = walk(t.ElseList).(*parse.ListNode)
			}
		case *parse.ActionNode:
			n := walk(t.Pipe)
			if n == nil {
				return nil
			}
			t.Pipe = n.(*parse.PipeNode)
		case *parse.PipeNode:
			var commands []*parse.CommandNode
			for _, c := range t.Cmds {
				var args []parse.Node
				for _, a := range c.Args {
					if n := walk(a); n != nil {
						args = append(args, n)
					}
				}
				if len(args) == 0 {
					return nil
				}
				c.Args = args
				commands = append(commands, c)
			}
			if len(commands) == 0 {
				return nil
			}
			t.Cmds = commands
		}
		return n
	}
	return walk(n)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
