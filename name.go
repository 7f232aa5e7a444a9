package locker

import (
	"bytes"
	"fmt"
	"text/template"
)

// NameTemplate builds lock names from a value, the Go counterpart of an
// annotation with an expression key (lock4j's @Lock4j(keys = "#order.id")):
//
//	orders := locker.MustParseName("order:{{.ID}}")
//	name, err := orders.Name(order) // "order:42"
//	m := c.NewMutex(name)
//
// It is a text/template whose missing keys are errors, so a typo in a field
// name fails instead of producing "order:<no value>" — a name that every
// order would share.
type NameTemplate struct {
	t *template.Template
}

// ParseName parses a name template. The error says what is wrong with it.
func ParseName(text string) (*NameTemplate, error) {
	t, err := template.New("lock name").Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, fmt.Errorf("locker: name template %q: %w", text, err)
	}
	return &NameTemplate{t: t}, nil
}

// MustParseName is ParseName for templates fixed in the program; it panics
// on a bad template, which is a programming error.
func MustParseName(text string) *NameTemplate {
	t, err := ParseName(text)
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
		return "", fmt.Errorf("%w: template %q: %v", ErrInvalidName, n.t.Root.String(), err)
	}
	name := b.String()
	if err := validName(name); err != nil {
		return "", fmt.Errorf("template %q gave %q: %w", n.t.Root.String(), name, err)
	}
	return name, nil
}
