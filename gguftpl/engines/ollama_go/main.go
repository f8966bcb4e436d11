// gguftpl's worker for Ollama's chat-template engine: Go text/template with Ollama's functions and Execute logic
// (template.go, api.go beside this file), built by `gguftpl engines install ollama` with the system's Go.
//
// It speaks gguftpl's worker frames (gguftpl/worker.py): a 4-byte big-endian length, then UTF-8 JSON, on stdin
// and stdout. It writes {"ready": true} first, then for each request {"op", "items"} one answer frame per item:
// {"kind": "ok", "value": ...} or {"kind": "error", "type", "message"}.
//
// Ops: "load" (item: template text -> {"error": null | {kind, message, line}, "vars": Template.Vars()}), "render" (item: {template,
// requests: [chat request as Ollama's ChatHandler holds it]} -> [{text, error}...]), "version".
//
// Bounds: the parent kills this process when an item takes too long; output past the byte cap stops the render
// (an "overrun"); debug.SetMemoryLimit makes the collector work hard before RLIMIT_DATA kills it. It exits when
// stdin closes or its parent changes (a killed parent may leave the pipe open).
//
// argv: <max output bytes> <soft memory limit bytes>

package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"runtime/debug"
	"strconv"
	"time"
)

// OllamaCommit is the ollama/ollama commit template.go and api.go reproduce.
const OllamaCommit = "fb30760996871fa9460115c753afd2c60d4ab0f7"

const maxFrame = 256 << 20

var errOverrun = errors.New("output too large")

var maxOutput = 1 << 20

// capped is a buffer that refuses to grow past maxOutput bytes.
type capped struct {
	bytes.Buffer
}

func (c *capped) Write(p []byte) (int, error) {
	if c.Len()+len(p) > maxOutput {
		return 0, errOverrun
	}
	return c.Buffer.Write(p)
}

type engineError struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
	Line    *int   `json:"line"`
}

type rendered struct {
	Text  *string      `json:"text"`
	Error *engineError `json:"error"`
}

// wireToolCall is one tool call as the Python side sends it: OpenAI's, arguments still a JSON string.
type wireToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// wireMessage is api.Message with OpenAI's tool calls (not embedded: Message.UnmarshalJSON would be promoted).
type wireMessage struct {
	Role       string         `json:"role"`
	Content    string         `json:"content"`
	Thinking   string         `json:"thinking"`
	Images     []ImageData    `json:"images"`
	ToolCalls  []wireToolCall `json:"tool_calls"`
	ToolName   string         `json:"tool_name"`
	ToolCallID string         `json:"tool_call_id"`
}

type wireRequest struct {
	Messages []json.RawMessage `json:"messages"`
	Tools    json.RawMessage   `json:"tools"`
	Think    any               `json:"think"`
}

type renderItem struct {
	Template string        `json:"template"`
	Requests []wireRequest `json:"requests"`
}

var lineRe = regexp.MustCompile(`^template: [^:]*:(\d+)`)

func toError(kind string, err error) *engineError {
	msg := err.Error()
	e := &engineError{Kind: kind, Message: msg}
	if m := lineRe.FindStringSubmatch(msg); m != nil {
		if n, convErr := strconv.Atoi(m[1]); convErr == nil {
			e.Line = &n
		}
	}
	if errors.Is(err, errOverrun) {
		e.Kind = "overrun"
		e.Message = fmt.Sprintf("the prompt grew past %d bytes and was stopped", maxOutput)
		e.Line = nil
	}
	return e
}

var cached struct {
	text string
	tmpl *Template
	err  error
}

func parseCached(text string) (*Template, error) {
	if cached.tmpl == nil && cached.err == nil || cached.text != text {
		cached.text = text
		cached.tmpl, cached.err = Parse(text)
	}
	return cached.tmpl, cached.err
}

// chatRequest turns one wire request into what renderPrompt gets: openai.FromCompletionToolCall parses each
// call's arguments string, and ChatHandler's re-binding of the re-encoded request lowercases roles
// (api.Message.UnmarshalJSON) and decodes tools into api.Tools.
func chatRequest(req wireRequest) (Values, error) {
	var v Values
	for _, raw := range req.Messages {
		var wm wireMessage
		if err := json.Unmarshal(raw, &wm); err != nil {
			return v, err
		}
		m := Message{
			Role: wm.Role, Content: wm.Content, Thinking: wm.Thinking, Images: wm.Images,
			ToolName: wm.ToolName, ToolCallID: wm.ToolCallID,
		}
		for _, tc := range wm.ToolCalls {
			var call ToolCall
			call.ID = tc.ID
			call.Function.Name = tc.Name
			if err := json.Unmarshal([]byte(tc.Arguments), &call.Function.Arguments); err != nil {
				return v, errors.New("invalid tool call arguments")
			}
			m.ToolCalls = append(m.ToolCalls, call)
		}
		// the middleware re-encodes the request and ChatHandler binds it again
		enc, err := json.Marshal(m)
		if err != nil {
			return v, err
		}
		var back Message
		if err := json.Unmarshal(enc, &back); err != nil {
			return v, err
		}
		v.Messages = append(v.Messages, back)
	}
	if len(req.Tools) > 0 && !bytes.Equal(bytes.TrimSpace(req.Tools), []byte("null")) {
		if err := json.Unmarshal(req.Tools, &v.Tools); err != nil {
			return v, err
		}
	}
	if req.Think != nil {
		think := &ThinkValue{Value: req.Think}
		v.Think, v.ThinkLevel, v.IsThinkSet = think.Bool(), think.String(), true
	}
	return v, nil
}

func renderOne(t *Template, req wireRequest) (out rendered) {
	defer func() {
		if r := recover(); r != nil {
			out = rendered{Error: &engineError{Kind: "crashed", Message: fmt.Sprintf("panic: %v", r)}}
		}
	}()
	v, err := chatRequest(req)
	if err != nil {
		return rendered{Error: &engineError{Kind: "render", Message: err.Error()}}
	}
	var w, scratch capped
	if err := t.Execute(&w, v, &scratch); err != nil {
		return rendered{Error: toError("render", err)}
	}
	text := w.String()
	return rendered{Text: &text}
}

func handle(op string, item json.RawMessage) (any, error) {
	switch op {
	case "version":
		return map[string]any{"go": runtime.Version(), "ollama": OllamaCommit}, nil
	case "load":
		var text string
		if err := json.Unmarshal(item, &text); err != nil {
			return nil, err
		}
		t, err := parseCached(text)
		if err != nil {
			return map[string]any{"error": toError("syntax", err)}, nil
		}
		// Template.Vars() is Ollama's tools capability test (server/images.go: "tools" among them)
		vars, err := t.Vars()
		if err != nil {
			return map[string]any{"error": toError("syntax", err)}, nil
		}
		return map[string]any{"error": nil, "vars": vars}, nil
	case "render":
		var it renderItem
		if err := json.Unmarshal(item, &it); err != nil {
			return nil, err
		}
		out := make([]rendered, 0, len(it.Requests))
		t, err := parseCached(it.Template)
		for _, req := range it.Requests {
			if err != nil {
				out = append(out, rendered{Error: toError("syntax", err)})
				continue
			}
			out = append(out, renderOne(t, req))
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown op %q", op)
}

func readFrame(r io.Reader) ([]byte, error) {
	var head [4]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(head[:])
	if n > maxFrame {
		return nil, fmt.Errorf("frame of %d bytes", n)
	}
	buf := make([]byte, n)
	_, err := io.ReadFull(r, buf)
	return buf, err
}

func writeFrame(w *bufio.Writer, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		data, _ = json.Marshal(map[string]any{"kind": "error", "type": "TypeError", "message": err.Error()})
	}
	var head [4]byte
	binary.BigEndian.PutUint32(head[:], uint32(len(data)))
	_, _ = w.Write(head[:])
	_, _ = w.Write(data)
	if err := w.Flush(); err != nil {
		os.Exit(1)
	}
}

func watchParent() {
	parent := os.Getppid()
	for range time.Tick(250 * time.Millisecond) {
		if os.Getppid() != parent {
			os.Exit(1)
		}
	}
}

func answer(op string, item json.RawMessage) (frame map[string]any) {
	defer func() {
		if r := recover(); r != nil {
			frame = map[string]any{"kind": "error", "type": "Panic", "message": fmt.Sprint(r)}
		}
	}()
	value, err := handle(op, item)
	if err != nil {
		return map[string]any{"kind": "error", "type": "ValueError", "message": err.Error()}
	}
	return map[string]any{"kind": "ok", "value": value}
}

func main() {
	if len(os.Args) > 1 {
		if n, err := strconv.Atoi(os.Args[1]); err == nil && n > 0 {
			maxOutput = n
		}
	}
	if len(os.Args) > 2 {
		if n, err := strconv.ParseInt(os.Args[2], 10, 64); err == nil && n > 0 {
			debug.SetMemoryLimit(n)
		}
	}
	go watchParent()
	in := bufio.NewReaderSize(os.Stdin, 1<<16)
	out := bufio.NewWriterSize(os.Stdout, 1<<16)
	writeFrame(out, map[string]any{"ready": true})
	for {
		data, err := readFrame(in)
		if err != nil {
			os.Exit(0)
		}
		var req struct {
			Op    string            `json:"op"`
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(data, &req); err != nil {
			writeFrame(out, map[string]any{"kind": "error", "type": "ValueError", "message": err.Error()})
			continue
		}
		for _, item := range req.Items {
			writeFrame(out, answer(req.Op, item))
		}
	}
}
