package chunker

import (
	"net/url"
	"path"
	"strconv"
	"strings"
	"unicode"
)

// codeExtensions maps a file name's extension (lower case, without its
// dot) to the language of its source code, a fence's info string as
// GitHub and most Markdown renderers name it. docs/protocol.md's docs.put
// lists them and codeNames, which clients read (held by
// TestProtocolDocListsEveryCodeName).
var codeExtensions = map[string]string{
	"go": "go", "py": "python", "pyi": "python", "ts": "typescript", "mts": "typescript", "cts": "typescript",
	"tsx": "tsx", "js": "javascript", "mjs": "javascript", "cjs": "javascript", "jsx": "jsx",
	"rs": "rust", "c": "c", "h": "c", "cc": "cpp", "cpp": "cpp", "cxx": "cpp", "hh": "cpp", "hpp": "cpp", "hxx": "cpp",
	"java": "java", "kt": "kotlin", "kts": "kotlin", "scala": "scala", "groovy": "groovy", "gradle": "groovy",
	"swift": "swift", "m": "objectivec", "mm": "objectivec", "cs": "csharp", "fs": "fsharp", "vb": "vbnet",
	"rb": "ruby", "php": "php", "pl": "perl", "pm": "perl", "lua": "lua", "r": "r", "jl": "julia", "dart": "dart",
	"ex": "elixir", "exs": "elixir", "erl": "erlang", "hrl": "erlang", "hs": "haskell", "ml": "ocaml", "mli": "ocaml",
	"clj": "clojure", "cljs": "clojure", "zig": "zig", "nim": "nim", "v": "v", "sol": "solidity",
	"sh": "bash", "bash": "bash", "zsh": "zsh", "fish": "fish", "ps1": "powershell", "bat": "batch", "cmd": "batch",
	"sql": "sql", "proto": "protobuf", "graphql": "graphql", "gql": "graphql", "tf": "hcl", "hcl": "hcl",
	"yaml": "yaml", "yml": "yaml", "json": "json", "jsonc": "jsonc", "toml": "toml", "xml": "xml", "mk": "makefile",
	"css": "css", "scss": "scss", "less": "less", "vue": "vue", "svelte": "svelte", "cmake": "cmake", "nix": "nix",
	"diff": "diff", "patch": "diff",
	// Configuration: its "#" comments read as Markdown headed the lines
	// under them (a walk with /etc's files and a Dockerfile.prod).
	"ini": "ini", "cfg": "ini", "cnf": "ini", "desktop": "ini", "conf": "conf", "properties": "properties",
	"env": "dotenv", "dockerfile": "dockerfile", "containerfile": "dockerfile", "tfvars": "hcl",
	"bzl": "starlark", "bazel": "starlark", "ksh": "bash", "psm1": "powershell",
	// systemd's units (INI).
	"service": "ini", "socket": "ini", "timer": "ini", "mount": "ini", "automount": "ini", "target": "ini",
}

// codeNames maps a file name without an extension that says its language.
var codeNames = map[string]string{
	"dockerfile": "dockerfile", "containerfile": "dockerfile", "makefile": "makefile", "gnumakefile": "makefile",
	"cmakelists.txt": "cmake", "go.mod": "go", "justfile": "makefile",
	"jenkinsfile": "groovy", "vagrantfile": "ruby", "gemfile": "ruby", "rakefile": "ruby", "brewfile": "ruby",
	"pipfile": "toml", ".env": "dotenv", ".editorconfig": "ini", ".gitconfig": "ini", ".gitmodules": "ini",
	".npmrc": "ini", ".pylintrc": "ini", ".flake8": "ini", ".gitignore": "gitignore", ".dockerignore": "gitignore",
	".npmignore": "gitignore", ".bashrc": "bash", ".bash_profile": "bash", ".bash_logout": "bash", ".profile": "bash",
	".zshrc": "zsh", ".zprofile": "zsh", ".zshenv": "zsh",
}

// codePrefixes maps what a file name starts with to its language, for
// names whose extension says which variant they are ("Dockerfile.prod",
// ".env.local", "Makefile.am"), but for a Markdown or text extension
// (proseExtensions: "Dockerfile.md" documents a Dockerfile).
var codePrefixes = map[string]string{
	"dockerfile.": "dockerfile", "containerfile.": "dockerfile", "makefile.": "makefile", ".env.": "dotenv",
}

// proseExtensions are Markdown's and plain text's, which no prefix
// (codePrefixes) makes code.
var proseExtensions = map[string]bool{
	"md": true, "markdown": true, "mdx": true, "txt": true, "text": true, "rst": true, "adoc": true,
	"asciidoc": true, "org": true, "html": true, "htm": true,
}

// interpreters maps a script's interpreter (its "#!" line's program,
// version digits dropped) to its language where the two are not named
// alike.
var interpreters = map[string]string{
	"sh": "bash", "dash": "bash", "ash": "bash", "ksh": "bash", "mksh": "bash", "node": "javascript",
	"nodejs": "javascript", "deno": "javascript", "bun": "javascript", "ts-node": "typescript",
	"rscript": "r", "pwsh": "powershell", "make": "makefile", "runghc": "haskell", "escript": "erlang",
}

// Version numbers how Split cuts documents. Raise it with a change to
// chunking that documents already stored should get (a fix of their
// chunks): docs.put cuts a document again when it is put with the
// content it holds if another version cut it (Chunking), where such a
// put wrote nothing and the document kept its old chunks until its
// content changed.
const Version = 1

// Chunking names how Split cuts the document named name holding
// content: Version, and the Language it is cut as, "1 go" for Go, "1"
// for Markdown or plain text. docs.put keeps it with the document and
// cuts the document again at a put of its content under a name that
// cuts it otherwise, or after an upgrade that raised Version.
func Chunking(name, content string) string {
	if lang := Language(name, content); lang != "" {
		return strconv.Itoa(Version) + " " + lang
	}
	return strconv.Itoa(Version)
}

// Language is the language of the source code a document holds, by its
// name (CodeLanguage) or, when the name has no extension ("deploy",
// "bin/run"), by the interpreter its "#!" line names ("#!/bin/sh"
// "bash", "#!/usr/bin/env python3" "python"), whose "# comments" read as
// headings; "" for Markdown or plain text.
func Language(name, content string) string {
	if lang := CodeLanguage(name); lang != "" {
		return lang
	}
	if base := path.Base(baseName(name)); strings.LastIndexByte(base, '.') > 0 {
		return ""
	}
	return scriptLanguage(content)
}

// scriptLanguage is the language of the interpreter content's "#!" line
// names, "" when it opens with none.
func scriptLanguage(content string) string {
	content = strings.TrimPrefix(content, "\ufeff")
	if !strings.HasPrefix(content, "#!") {
		return ""
	}
	line, _, _ := strings.Cut(content[2:], "\n")
	f := strings.Fields(line)
	if len(f) == 0 {
		return ""
	}
	prog := path.Base(f[0])
	if prog == "env" { // "#!/usr/bin/env -S python3 -u": its program, after options and settings
		prog = ""
		for _, a := range f[1:] {
			if !strings.HasPrefix(a, "-") && !strings.Contains(a, "=") {
				prog = path.Base(a)
				break
			}
		}
	}
	prog = strings.TrimRight(strings.ToLower(prog), "0123456789.")
	if lang, ok := interpreters[prog]; ok {
		return lang
	}
	if prog == "" || !infoString.MatchString(prog) {
		return ""
	}
	return prog
}

// CodeLanguage is the language of the source code a document's name (a
// file name, a path or a URL) says it holds, by its extension (".go"
// "go", ".py" "python", ".ts" "typescript", ".yaml" "yaml", ...) or its
// name ("Dockerfile", "Makefile"), or "" when the name says none: a
// document of Markdown or plain text (".md", ".txt", no extension). A
// query or a fragment is not the name's: "app.py?raw=1" and "lib.rs#L10"
// are code, as a URL's are.
func CodeLanguage(name string) string {
	if u, err := url.Parse(name); err == nil && u.Scheme != "" && u.Host != "" {
		name = u.Path // not its query or fragment
	}
	base := strings.ToLower(path.Base(baseName(name)))
	if lang, ok := codeNames[base]; ok {
		return lang
	}
	ext := ""
	if i := strings.LastIndexByte(base, '.'); i > 0 {
		ext = base[i+1:]
	}
	if lang, ok := codeExtensions[ext]; ok {
		return lang
	}
	for prefix, lang := range codePrefixes {
		if strings.HasPrefix(base, prefix) && !proseExtensions[ext] {
			return lang
		}
	}
	return ""
}

// baseName is name (a path, "\" or "/" separated, or a URL's path) with
// "/" separators, without its query (from the first "?") or a fragment
// (from a "#" in the last path element: "src/C#/Program.cs" keeps its
// directory's): a download link's "?raw=1" or an editor's "#L10" made
// "app.py?raw=1" Markdown, its "# comments" headings.
func baseName(name string) string {
	name = strings.ReplaceAll(name, `\`, "/")
	name, _, _ = strings.Cut(name, "?")
	if i := strings.LastIndexByte(name, '/'); strings.Contains(name[i+1:], "#") {
		name = name[:i+1+strings.IndexByte(name[i+1:], '#')]
	}
	return name
}

// codeFence is the fence of a code document's chunks: three backticks,
// or tildes where the source has a line opening with three backticks,
// one longer than any such run in the source, so that no line of the
// source closes it. A line is read as a Markdown reader and enrich's
// injection read it: a lone "\r" ends one too (CommonMark), and the
// white space and control characters before a run (a no-break space,
// "\v") do not hide it, since the injection drops them (a Python
// docstring's "\u00a0```" closed the injected chunk's fence).
func codeFence(src string) string {
	var longest [2]int // of backticks, of tildes, opening a line
	for _, line := range strings.FieldsFunc(src, func(r rune) bool { return r == '\n' || r == '\r' }) {
		t := strings.TrimLeftFunc(line, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) })
		for k, c := range "`~" {
			n := len(t) - len(strings.TrimLeft(t, string(c)))
			longest[k] = max(longest[k], n)
		}
	}
	if longest[0] < 3 {
		return "```"
	}
	if longest[1] < longest[0] {
		return strings.Repeat("~", max(3, longest[1]+1))
	}
	return strings.Repeat("`", longest[0]+1)
}

// splitCode cuts a source code document (cfg.Code set): its runs of
// non-blank lines are its blocks, cut between lines (a line longer than
// a chunk between words), and each chunk is the source between fence
// lines: the fence with the language, and the fence closing it, headed
// by its top-level declaration (codeHeadings). The
// chunks are packed smaller by those two lines, so that none exceeds
// cfg.MaxTokens; when they would take over half a chunk (a source of
// very long fence-like runs) the chunks are not fenced.
func splitCode(src string, cfg Config) []Chunk {
	fence := codeFence(src)
	open, closing := fence+cfg.Code+"\n", "\n"+fence
	c := cfg
	if extra := Tokens(open) + Tokens(closing); extra <= cfg.MaxTokens/2 {
		c.MaxTokens -= extra
	} else {
		open, closing = "", ""
	}
	c.Overlap = min(c.Overlap, c.MaxTokens/2)
	start := 0
	if strings.HasPrefix(src, "\ufeff") {
		start = len("\ufeff")
	}
	var segs []segment
	for _, b := range codeBlocks(src, start) {
		first := true
		for _, p := range lineSpans(src, b) {
			p.s = lineStart(src, p.s)
			for _, q := range fit(src, p, c.MaxTokens) {
				// code: an overlap is of whole lines.
				segs = append(segs, segment{span: q, first: first, code: true})
				first = false
			}
		}
	}
	decls := codeDecls(src, cfg.Code)
	var chunks []Chunk
	for _, sp := range pack(src, segs, c) {
		text := open + src[sp.s:sp.e] + closing
		chunks = append(chunks, Chunk{Index: len(chunks), Headings: codeHeadings(decls, sp.s, sp.e),
			Start: sp.s, End: sp.e, Text: text, Tokens: Tokens(text)})
	}
	return chunks
}

// codeBlocks are the runs of non-blank lines of src from start.
func codeBlocks(src string, start int) []span {
	var out []span
	for _, l := range lineSpans(src, span{start, len(src)}) {
		if n := len(out); n > 0 && strings.Count(src[out[n-1].e:l.s], "\n") < 2 {
			out[n-1].e = l.e
		} else {
			out = append(out, l)
		}
	}
	return out
}
