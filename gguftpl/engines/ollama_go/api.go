// The parts of Ollama's api package a chat template sees, reproduced with the standard library (Go 1.19 has no
// iter, maps or slices). Source: api/types.go and internal/orderedmap/orderedmap.go @fb30760996871fa9460115c753afd2c60d4ab0f7
// (ollama/ollama, MIT). Field names, JSON tags, String() and MarshalJSON follow that file, so {{ json .Tools }},
// {{ .Function.Arguments }} and friends print what Ollama prints.

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ImageData is api.ImageData: raw bytes (base64 in JSON).
type ImageData []byte

// Message is api.Message.
type Message struct {
	Role       string      `json:"role"`
	Content    string      `json:"content"`
	Thinking   string      `json:"thinking,omitempty"`
	Images     []ImageData `json:"images,omitempty"`
	ToolCalls  []ToolCall  `json:"tool_calls,omitempty"`
	ToolName   string      `json:"tool_name,omitempty"`
	ToolCallID string      `json:"tool_call_id,omitempty"`
}

// UnmarshalJSON lowercases the role, as api.Message.UnmarshalJSON does when ChatHandler binds the request the
// OpenAI middleware re-encoded.
func (m *Message) UnmarshalJSON(b []byte) error {
	type Alias Message
	var a Alias
	if err := json.Unmarshal(b, &a); err != nil {
		return err
	}
	*m = Message(a)
	m.Role = strings.ToLower(m.Role)
	return nil
}

// ToolCall is api.ToolCall.
type ToolCall struct {
	ID       string           `json:"id,omitempty"`
	Function ToolCallFunction `json:"function"`
}

// ToolCallFunction is api.ToolCallFunction.
type ToolCallFunction struct {
	Index     int                       `json:"index"`
	Name      string                    `json:"name"`
	Arguments ToolCallFunctionArguments `json:"arguments"`
}

// ToolCallFunctionArguments is api.ToolCallFunctionArguments: an insertion-ordered map.
type ToolCallFunctionArguments struct {
	om *omap[any]
}

func (t *ToolCallFunctionArguments) ToMap() map[string]any {
	if t == nil || t.om == nil {
		return nil
	}
	return t.om.toMap()
}

func (t *ToolCallFunctionArguments) String() string {
	if t == nil || t.om == nil {
		return "{}"
	}
	bts, _ := json.Marshal(t.om)
	return string(bts)
}

func (t *ToolCallFunctionArguments) UnmarshalJSON(data []byte) error {
	t.om = &omap[any]{}
	return decodeOrdered(data, &t.om)
}

func (t ToolCallFunctionArguments) MarshalJSON() ([]byte, error) {
	if t.om == nil {
		return []byte("{}"), nil
	}
	return json.Marshal(t.om)
}

// Tools is api.Tools.
type Tools []Tool

func (t Tools) String() string {
	bts, _ := json.Marshal(t)
	return string(bts)
}

// Tool is api.Tool.
type Tool struct {
	Type     string       `json:"type"`
	Items    any          `json:"items,omitempty"`
	Function ToolFunction `json:"function"`
}

func (t Tool) String() string {
	bts, _ := json.Marshal(t)
	return string(bts)
}

// PropertyType is api.PropertyType: a string or a list of strings.
type PropertyType []string

func (pt *PropertyType) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err == nil {
		*pt = []string{s}
		return nil
	}
	var a []string
	if err := json.Unmarshal(data, &a); err != nil {
		return err
	}
	*pt = a
	return nil
}

func (pt PropertyType) MarshalJSON() ([]byte, error) {
	if len(pt) == 1 {
		return json.Marshal(pt[0])
	}
	return json.Marshal([]string(pt))
}

func (pt PropertyType) String() string {
	if len(pt) == 0 {
		return ""
	}
	if len(pt) == 1 {
		return pt[0]
	}
	return fmt.Sprintf("%v", []string(pt))
}

// ToolPropertiesMap is api.ToolPropertiesMap: properties in insertion order.
type ToolPropertiesMap struct {
	om *omap[ToolProperty]
}

func (t *ToolPropertiesMap) ToMap() map[string]ToolProperty {
	if t == nil || t.om == nil {
		return nil
	}
	return t.om.toMap()
}

func (t ToolPropertiesMap) MarshalJSON() ([]byte, error) {
	if t.om == nil {
		return []byte("null"), nil
	}
	return json.Marshal(t.om)
}

func (t *ToolPropertiesMap) UnmarshalJSON(data []byte) error {
	t.om = &omap[ToolProperty]{}
	return decodeOrdered(data, &t.om)
}

// ToolProperty is api.ToolProperty.
type ToolProperty struct {
	AnyOf       []ToolProperty     `json:"anyOf,omitempty"`
	Type        PropertyType       `json:"type,omitempty"`
	Items       any                `json:"items,omitempty"`
	Description string             `json:"description,omitempty"`
	Enum        []any              `json:"enum,omitempty"`
	Properties  *ToolPropertiesMap `json:"properties,omitempty"`
	Required    []string           `json:"required,omitempty"`
}

// ToTypeScriptType is api.ToolProperty.ToTypeScriptType.
func (tp ToolProperty) ToTypeScriptType() string {
	if len(tp.AnyOf) > 0 {
		var types []string
		for _, anyOf := range tp.AnyOf {
			types = append(types, anyOf.ToTypeScriptType())
		}
		return strings.Join(types, " | ")
	}
	if len(tp.Type) == 0 {
		return "any"
	}
	if len(tp.Type) == 1 {
		return mapToTypeScriptType(tp.Type[0])
	}
	var types []string
	for _, t := range tp.Type {
		types = append(types, mapToTypeScriptType(t))
	}
	return strings.Join(types, " | ")
}

func mapToTypeScriptType(jsonType string) string {
	switch jsonType {
	case "string":
		return "string"
	case "number", "integer":
		return "number"
	case "boolean":
		return "boolean"
	case "array":
		return "any[]"
	case "object":
		return "Record<string, any>"
	case "null":
		return "null"
	default:
		return "any"
	}
}

// ToolFunctionParameters is api.ToolFunctionParameters.
type ToolFunctionParameters struct {
	Type       string             `json:"type"`
	Defs       any                `json:"$defs,omitempty"`
	Items      any                `json:"items,omitempty"`
	Required   []string           `json:"required,omitempty"`
	Properties *ToolPropertiesMap `json:"properties"`
}

func (t *ToolFunctionParameters) String() string {
	bts, _ := json.Marshal(t)
	return string(bts)
}

// ToolFunction is api.ToolFunction.
type ToolFunction struct {
	Name        string                 `json:"name"`
	Description string                 `json:"description,omitempty"`
	Parameters  ToolFunctionParameters `json:"parameters"`
}

func (t *ToolFunction) String() string {
	bts, _ := json.Marshal(t)
	return string(bts)
}

// ThinkValue is api.ThinkValue: nil, a bool or a level.
type ThinkValue struct {
	Value any
}

func (t *ThinkValue) Bool() bool {
	if t == nil || t.Value == nil {
		return false
	}
	switch v := t.Value.(type) {
	case bool:
		return v
	case string:
		return v == "high" || v == "medium" || v == "low" || v == "max"
	default:
		return false
	}
}

func (t *ThinkValue) String() string {
	if t == nil || t.Value == nil {
		return ""
	}
	switch v := t.Value.(type) {
	case string:
		return v
	case bool:
		if v {
			return "medium"
		}
		return ""
	default:
		return ""
	}
}

// omap is the insertion-ordered map behind internal/orderedmap (wk8/go-ordered-map): JSON objects keep their key
// order both ways; a later duplicate key replaces the value in its first place.
type omap[V any] struct {
	keys []string
	vals map[string]V
}

func (m *omap[V]) toMap() map[string]V {
	out := make(map[string]V, len(m.vals))
	for k, v := range m.vals {
		out[k] = v
	}
	return out
}

func (m *omap[V]) MarshalJSON() ([]byte, error) {
	if m == nil {
		return []byte("null"), nil
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range m.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		vb, err := json.Marshal(m.vals[k])
		if err != nil {
			return nil, err
		}
		b.Write(kb)
		b.WriteByte(':')
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

var errNotObject = errors.New("not a JSON object")

// decodeOrdered reads a JSON object into *dst in key order; JSON null leaves *dst nil, as json.Unmarshal into
// a pointer does.
func decodeOrdered[V any](data []byte, dst **omap[V]) error {
	trimmed := bytes.TrimSpace(data)
	if bytes.Equal(trimmed, []byte("null")) {
		*dst = nil
		return nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &raw); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return errNotObject
	}
	m := &omap[V]{vals: make(map[string]V, len(raw))}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return err
		}
		if _, seen := m.vals[key]; seen {
			continue
		}
		var v V
		if err := json.Unmarshal(raw[key], &v); err != nil {
			return err
		}
		m.keys = append(m.keys, key)
		m.vals[key] = v
	}
	*dst = m
	return nil
}
