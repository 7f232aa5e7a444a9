package doccheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const root = "../.."

var (
	codeSpan = regexp.MustCompile("`([^`]+)`")
	link     = regexp.MustCompile(`\]\(([^)]+)\)`)
	// fileName is a span without a slash that names a file by its extension.
	fileName = regexp.MustCompile(`^[\w.-]+\.(go|md|mod|work|lua|sql|sh|py|json)$`)
)

// tour returns the section of CONTRIBUTING.md from the heading of the tour
// to the next heading of the same level.
func tour(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "CONTRIBUTING.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	const heading = "\n## A ten-minute tour\n"
	i := strings.Index(text, heading)
	if i < 0 {
		t.Fatalf("CONTRIBUTING.md has no %q section", strings.TrimSpace(heading))
	}
	text = text[i+len(heading):]
	if j := strings.Index(text, "\n## "); j >= 0 {
		text = text[:j]
	}
	return text
}

// paths returns what the tour names as paths: code spans that contain a
// slash or name a file by its extension (a command, with a space, or a
// URL is not one), and the targets of its links.
func paths(text string) []string {
	var out []string
	for _, m := range codeSpan.FindAllStringSubmatch(text, -1) {
		s := m[1]
		switch {
		case strings.ContainsAny(s, " :") || strings.HasPrefix(s, "golang.org/") || strings.HasPrefix(s, "github.com/"):
		case strings.Contains(s, "/") || fileName.MatchString(s):
			out = append(out, s)
		}
	}
	for _, m := range link.FindAllStringSubmatch(text, -1) {
		if !strings.Contains(m[1], "://") {
			out = append(out, m[1])
		}
	}
	return out
}

// TestTourPathsExist fails when CONTRIBUTING.md's tour names a file or
// directory that the tree does not have, a glob that matches nothing, or
// an anchor that its document does not define.
func TestTourPathsExist(t *testing.T) {
	ps := paths(tour(t))
	if len(ps) < 20 {
		t.Fatalf("the tour names only %d paths: %q", len(ps), ps)
	}
	for _, p := range ps {
		p, anchor, _ := strings.Cut(p, "#")
		full := filepath.Join(root, filepath.FromSlash(p))
		if strings.Contains(p, "*") {
			if m, err := filepath.Glob(full); err != nil || len(m) == 0 {
				t.Errorf("the tour names %q, which matches nothing in the tree", p)
			}
			continue
		}
		info, err := os.Stat(full)
		if err != nil {
			t.Errorf("the tour names %q, which is not in the tree", p)
			continue
		}
		if strings.HasSuffix(p, "/") && !info.IsDir() {
			t.Errorf("the tour names %q as a directory; it is a file", p)
		}
		if anchor != "" {
			b, err := os.ReadFile(full)
			if err != nil {
				t.Error(err)
				continue
			}
			if !strings.Contains(string(b), `<a id="`+anchor+`"></a>`) {
				t.Errorf("the tour links to %s#%s, which %s does not define", p, anchor, p)
			}
		}
	}
}
