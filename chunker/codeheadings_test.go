package chunker

import (
	"slices"
	"strings"
	"testing"
)

// TestCodeChunksAreHeadedByTheirDeclaration: a code document's chunk is
// headed by the first top-level declaration starting in it, else by the
// one whose body it starts in, and by none outside one (after a body's
// end, among top-level statements, or in a language without
// declarations read). Before, every code chunk had no heading path: its
// citation read "store.go, chunk 3" and no name was searched as a
// heading's words.
func TestCodeChunksAreHeadedByTheirDeclaration(t *testing.T) {
	t.Parallel()
	// A check is a chunk from the line opening with from through the
	// line opening with to, and its headings.
	type check struct {
		from, to string
		want     []string
	}
	for _, tt := range []struct {
		lang, src string
		checks    []check
	}{
		{"go", "package store\n\n// Store runs queries.\ntype Store struct {\n\tpool int\n}\n\n// Put stores.\nfunc (s *Store) Put(x int) error {\n\ttotal += step\n\treturn nil\n}\n\n// A helper.\nfunc helper[T any](t T) {}\n\nvar (\n\tx = 1\n)\n",
			[]check{{"package", "type Store", []string{"Store"}}, {"\tpool", "}", []string{"Store"}}, {"// Put", "\ttotal", []string{"Store.Put"}},
				{"\treturn nil", "}", []string{"Store.Put"}}, {"// A helper.", "func helper", []string{"helper"}}, {"\tx = 1", ")", nil}, {"// Store", "}", []string{"Store"}}}},
		{"python", "import os\n\n@dataclass\nclass Config:\n    port: int = 8080\n\n\nasync def serve(cfg):\n    total += step\n    return total\n\nserve(Config())\nprint('done')\n",
			[]check{{"@dataclass", "class Config", []string{"Config"}}, {"    port", "    port", []string{"Config"}}, {"    return total", "    return total", []string{"serve"}},
				{"    port", "async def", []string{"serve"}}, {"print(", "print(", nil}, {"import os", "import os", nil}}},
		{"typescript", "export async function load(url: string): Promise<void> {\n  total += step;\n  return;\n}\nexport const LIMIT = 3;\n",
			[]check{{"  return;", "}", []string{"load"}}, {"}", "export const", []string{"LIMIT"}}}},
		{"rust", "impl<T> Display for Wrapper<T> {\n    total += step;\n    return;\n}\npub(crate) fn parse() {}\n#[test]\nfn check() {}\n",
			[]check{{"    return;", "}", []string{"Wrapper"}}, {"pub(crate)", "pub(crate)", []string{"parse"}}, {"#[test]", "fn check", []string{"check"}}}},
		{"ini", "; MySQL settings\n[mysqld]\n# The port of the server\nport = 3306\n\n[client]\nsocket = /run/mysqld.sock\n",
			[]check{{"# The port", "port", []string{"mysqld"}}, {"socket", "socket", []string{"client"}}, {"; MySQL", "; MySQL", nil}}},
		{"yaml", "# compose file\nservices:\n  db:\n    image: postgres\n    restart: always\nvolumes:\n  data: {}\n",
			[]check{{"    restart", "    restart", []string{"services"}}, {"  data", "  data", []string{"volumes"}}}},
		{"bash", "#!/bin/sh\nset -e\n\nstart() {\n  total=step\n  return 0\n}\n\nstart\necho done\n",
			[]check{{"  return 0", "}", []string{"start"}}, {"echo done", "echo done", nil}, {"#!/bin/sh", "set -e", nil}}},
		{"makefile", "GO ?= go\n\n.PHONY: test\ntest: build\n\tgo test ./...\n\tgo vet ./...\n",
			[]check{{"\tgo vet", "\tgo vet", []string{"test"}}, {"GO ?=", ".PHONY", nil}}},
		{"c", "int main(void) {\n  return 0;\n}\n", []check{{"  return 0;", "}", nil}}},
	} {
		decls := codeDecls(tt.src, tt.lang)
		for _, ck := range tt.checks {
			s, e := lineAt(tt.src, ck.from), lineAt(tt.src, ck.to)
			if s < 0 || e < 0 {
				t.Fatalf("%s: no line opens with %q or %q", tt.lang, ck.from, ck.to)
			}
			e += strings.IndexByte(tt.src[e:], '\n')
			if got := codeHeadings(decls, s, e); !slices.Equal(got, ck.want) {
				t.Errorf("%s: the chunk %q is headed %q, want %q", tt.lang, tt.src[s:e], got, ck.want)
			}
		}
	}
	// Split heads a code document's chunks so: a Go method's by its
	// receiver's type and its name.
	src := "package p\n\nfunc (s *Store) Ping(ctx context.Context) error {\n\treturn s.pool.Ping(ctx)\n}\n"
	cs, err := Split(src, Config{Code: "go"})
	if err != nil || len(cs) != 1 || !slices.Equal(cs[0].Headings, []string{"Store.Ping"}) {
		t.Errorf("Split of a Go method: %+v, %v; want one chunk headed Store.Ping", cs, err)
	}
}

// lineAt is the start of the first line of src opening with prefix, -1
// when none.
func lineAt(src, prefix string) int {
	for pos := 0; pos < len(src); {
		if strings.HasPrefix(src[pos:], prefix) {
			return pos
		}
		i := strings.IndexByte(src[pos:], '\n')
		if i < 0 {
			break
		}
		pos += i + 1
	}
	return -1
}
