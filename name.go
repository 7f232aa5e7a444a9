package locker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"text/template"
	"text/template/parse"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/driverkit"
)

// NameTemplate builds lock names from a value, the Go counterpart of an
// annotation with an expression key (lock4j's @Lock4j(keys = "#order.id")):
//
//	orders := locker.MustParseName("order:{{.ID}}")
//	err := orders.Do(ctx, c, order, func(ctx context.Context) error { ... })
//
// It is a text/template whose missing keys are errors, and whose actions
// must not print an empty value: "order:{{.Customer}}" with an empty
// Customer would give "order:", a name that every such order would share.
// AllowEmptyValues lifts the second rule.
type NameTemplate struct {
	t *template.Template
}

// NameOption configures ParseName.
type NameOption func(*nameConfig)

type nameConfig struct{ allowEmpty bool }

// AllowEmptyValues lets the template's actions print empty values.
func AllowEmptyValues() NameOption { return func(c *nameConfig) { c.allowEmpty = true } }

// nonEmptyFunc is the function ParseName appends to each action's pipeline.
const nonEmptyFunc = "golocker_nonempty"

var errEmptyValue = errors.New("an action printed an empty value")

// ParseName parses a name template. The error says what is wrong with it.
func ParseName(text string, opts ...NameOption) (*NameTemplate, error) {
	var cfg nameConfig
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	t, err := template.New("lock name").Option("missingkey=error").
		Funcs(template.FuncMap{nonEmptyFunc: nonEmpty}).Parse(text)
	if err != nil {
		return nil, fmt.Errorf("locker: name template %q: %w", text, err)
	}
	if !cfg.allowEmpty {
		for _, tt := range t.Templates() {
			if tt.Tree != nil {
				checkActions(tt.Tree.Root)
			}
		}
	}
	return &NameTemplate{t: t}, nil
}

// checkActions appends nonEmptyFunc to the pipeline of every action under n
// that prints (not the declarations of variables).
func checkActions(n parse.Node) {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return
		}
		for _, c := range n.Nodes {
			checkActions(c)
		}
	case *parse.ActionNode:
		if len(n.Pipe.Decl) == 0 {
			n.Pipe.Cmds = append(n.Pipe.Cmds, &parse.CommandNode{
				NodeType: parse.NodeCommand,
				Args:     []parse.Node{&parse.IdentifierNode{NodeType: parse.NodeIdentifier, Ident: nonEmptyFunc}},
			})
		}
	case *parse.IfNode:
		checkActions(n.List)
		checkActions(n.ElseList)
	case *parse.RangeNode:
		checkActions(n.List)
		checkActions(n.ElseList)
	case *parse.WithNode:
		checkActions(n.List)
		checkActions(n.ElseList)
	}
}

func nonEmpty(v any) (any, error) {
	if fmt.Sprint(v) == "" {
		return nil, errEmptyValue
	}
	return v, nil
}

// MustParseName is ParseName for templates fixed in the program; it panics
// on a bad template, which is a programming error.
func MustParseName(text string, opts ...NameOption) *NameTemplate {
	t, err := ParseName(text, opts...)
	if err != nil {
		panic(err)
	}
	return t
}

// Name executes the template on v and validates the result as a lock name.
// Errors wrap ErrInvalidName.
func (n *NameTemplate) Name(v any) (string, error) {
	var b bytes.Buffer
	if err := n.t.Execute(&b, v); err != nil {
		if errors.Is(err, errEmptyValue) {
			return "", fmt.Errorf("%w: template %q: a value is empty (the name would be shared by every value whose field is empty; see AllowEmptyValues)", ErrInvalidName, n.t.Root.String())
		}
		return "", fmt.Errorf("%w: template %q: %v", ErrInvalidName, n.t.Root.String(), err)
	}
	name := b.String()
	if err := backend.CheckName(name); err != nil {
		return "", fmt.Errorf("template %q gave %s: %w", n.t.Root.String(), driverkit.QuoteName(name), err)
	}
	return name, nil
}

// Do runs fn while holding the lock that the template names for v, on c:
// Name, NewMutex and Do in one call. Options of the handle go in
// MutexOptions.
func (n *NameTemplate) Do(ctx context.Context, c *Client, v any, fn func(ctx context.Context) error, opts ...DoOption) error {
	name, err := n.Name(v)
	if err != nil {
		return wrap("do", err)
	}
	return c.Do(ctx, name, fn, opts...)
}
