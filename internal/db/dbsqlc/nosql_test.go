package dbsqlc_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// root is the repository, from this package's directory.
const root = "../../.."

// sqlAllowed are the places outside the query layer whose Go may hold SQL
// text: test servers and the load tool's own checks (CONTRIBUTING.md).
var sqlAllowed = []string{
	"internal/db/dbsqlc", // the query layer itself (generated)
	"internal/testenv",   // test servers: creating and cloning test databases
	"internal/loadgen",   // the load tool reads PostgreSQL to check a run
}

// sqlStatement matches string literals that hold SQL, written in upper case
// as the project writes it: a literal that starts with a statement's first
// keyword, or that holds a clause of one anywhere, or calls a pg_ function.
var sqlStatement = regexp.MustCompile(
	`^\s*(SELECT|INSERT|UPDATE|DELETE|WITH|LISTEN|NOTIFY|UNLISTEN|SET|RESET|TRUNCATE|CREATE|ALTER|DROP|COPY|EXPLAIN|BEGIN|COMMIT|ROLLBACK)\s` +
		`|\bSELECT\s(.|\n)*\bFROM\b|\bINSERT\s+INTO\b|\bUPDATE\s+\w+(\s+\w+)?\s+SET\b|\bDELETE\s+FROM\b|\bON\s+CONFLICT\b|\bpg_[a-z_]+\(`)

// TestNoSQLOutsideTheQueryLayer keeps every SQL statement the daemons and
// operator commands run in internal/db/query: a non-test Go file under
// internal/ or cmd/ outside the allowed places holds no SQL text.
func TestNoSQLOutsideTheQueryLayer(t *testing.T) {
	t.Parallel()
	checked := 0
	for _, dir := range []string{"internal", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			rel = filepath.ToSlash(rel)
			if d.IsDir() {
				for _, a := range sqlAllowed {
					if rel == a {
						return filepath.SkipDir
					}
				}
				return nil
			}
			if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
				return nil
			}
			checked++
			for _, lit := range sqlLiterals(t, path) {
				t.Errorf("%s:%d: SQL outside the query layer (put it in internal/db/query, run make sqlc): %.80q",
					rel, lit.line, lit.text)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if checked < 50 {
		t.Fatalf("checked %d Go files; is root %s the repository?", checked, root)
	}
}

// TestSQLRuleCatchesStatements keeps the rule able to fail.
func TestSQLRuleCatchesStatements(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		"SELECT 1", "\n\t\tUPDATE envelopes SET status = $1", "a AS (\n  SELECT id\n  FROM envelopes)", "LISTEN redpacket_events",
		"SET LOCAL enable_seqscan = off", "WITH x AS (SELECT 1) SELECT * FROM x", "INSERT INTO t VALUES ($1)",
		"DELETE FROM events WHERE id = $1", "SELECT pg_try_advisory_lock($1, $2)", "rows AS (SELECT id FROM events)",
	} {
		if !sqlStatement.MatchString(s) {
			t.Errorf("%q is not taken for SQL", s)
		}
	}
	for _, s := range []string{
		"envelope %d is %s", "select a shard", "update the pool", "insert envelope %d: %w", "deleted %d events",
		"with a webhook", "set the bits", "listen on %s: %w",
	} {
		if sqlStatement.MatchString(s) {
			t.Errorf("%q is taken for SQL", s)
		}
	}
}

type literal struct {
	line int
	text string
}

// sqlLiterals returns the string literals of a Go file that hold SQL;
// generated files hold none by definition.
func sqlLiterals(t *testing.T, path string) []literal {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	if ast.IsGenerated(f) {
		return nil
	}
	var out []literal
	ast.Inspect(f, func(n ast.Node) bool {
		lit, ok := n.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return true
		}
		s, err := strconv.Unquote(lit.Value)
		if err == nil && sqlStatement.MatchString(s) {
			out = append(out, literal{fset.Position(lit.Pos()).Line, s})
		}
		return true
	})
	return out
}
