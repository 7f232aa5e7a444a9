package testserver

// Naming and placing the databases of the SQL and MongoDB servers
// (packages sqlserver and mongoserver).

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
)

// UniqueDBName returns a database name valid unquoted on every SQL dialect
// and on MongoDB: "lk_", up to 32 characters of the test name in
// [a-z0-9_], and 8 random hex digits. It stays under PostgreSQL's 63-byte
// identifier limit.
func UniqueDBName(t TB) string {
	var b strings.Builder
	for _, r := range strings.ToLower(t.Name()) {
		if b.Len() >= 32 {
			break
		}
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else if b.Len() > 0 && !strings.HasSuffix(b.String(), "_") {
			b.WriteByte('_')
		}
	}
	return "lk_" + strings.TrimSuffix(b.String(), "_") + "_" + RandomHex(4)
}

// RandomHex returns 2n random hex digits, for names and passwords.
func RandomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never returns an error on Linux
	return hex.EncodeToString(b)
}

// MaxSocketPath is the longest unix socket path we let a server create:
// sun_path holds 108 bytes on Linux, including the terminating NUL.
const MaxSocketPath = 100

// SocketDir returns dir if a socket named name fits in it, else a new short
// directory under the system temp dir, removed when t ends. t.TempDir paths
// carry the test name and can be too long.
func SocketDir(t TB, dir, name string) string {
	t.Helper()
	if len(filepath.Join(dir, name)) <= MaxSocketPath {
		return dir
	}
	short, err := os.MkdirTemp("", "lk")
	if err != nil {
		t.Fatalf("testserver: socket dir: %v", err)
		return ""
	}
	t.Cleanup(func() { _ = os.RemoveAll(short) })
	return short
}

// DatabaseServer is a server that hands each test a database of its own:
// sqlserver's SQLServer and mongoserver's MongoServer.
type DatabaseServer[D any] interface {
	comparable
	NewDatabase(t TB) D
}

// NewDatabaseOn returns a new database on the server start returns, or the
// zero D when start returned none (it skipped the test).
func NewDatabaseOn[S DatabaseServer[D], D any](t TB, start func(TB) S) D {
	t.Helper()
	var none S
	s := start(t)
	if s == none {
		var zero D
		return zero
	}
	return s.NewDatabase(t)
}
