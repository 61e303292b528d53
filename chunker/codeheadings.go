package chunker

import (
	"regexp"
	"sort"
	"strings"
)

// A code document's chunks are headed by the top-level declaration they
// are about: the first one starting in the chunk, else the one whose body
// the chunk starts in ("store.go › Store.PutDocument, chunk 3", where a
// citation read "store.go, chunk 3"), so that its name is searched as a
// heading's words are and a citation says where the code is. Declarations
// are read from lines at the margin only, by the patterns of declLangs:
// what a line at the margin that is no declaration says (declEnds) decides
// where a declaration's body ends. Languages without patterns (C, C++,
// SQL, ...) have no heading, as before.

// declKind is what a line at the margin is to the declarations.
type declKind int

const (
	declNone  declKind = iota // a comment, decorator or attribute: changes nothing
	declStart                 // a declaration: the lines after it are its body
	declEnd                   // the end of a body ("}", Ruby's "end"): the lines after it are in none
	declOther                 // a statement outside any declaration: it and the lines after it are in none
)

// declRule names a language family's declarations: each pattern's first
// non-empty group (and second, when there is one: Go's receiver) is the
// name. ends says which lines at the margin close a body, comments which
// ones change nothing; any other line is a statement (declOther), unless
// keep is set (sections run to the next one: INI, YAML).
type declRule struct {
	patterns []*regexp.Regexp
	ends     *regexp.Regexp
	comments *regexp.Regexp
	keep     bool
}

var (
	braceEnd     = regexp.MustCompile(`^[})\]]`)
	slashComment = regexp.MustCompile(`^(?://|/\*|\*|#|@|\[)`)
	hashComment  = regexp.MustCompile(`^(?:#|@)`)

	goDecl = declRule{patterns: []*regexp.Regexp{
		regexp.MustCompile(`^func\s*\(\s*(?:\w+\s+)?\*?\s*(\w+)(?:\[[^\]]*\])?\s*\)\s*(\w+)`),
		regexp.MustCompile(`^func\s+(\w+)`),
		regexp.MustCompile(`^(?:type|var|const)\s+(\w+)`),
	}, ends: braceEnd, comments: regexp.MustCompile(`^(?://|/\*|\*)`)}
	pythonDecl = declRule{patterns: []*regexp.Regexp{
		regexp.MustCompile(`^(?:async\s+)?def\s+(\w+)\s*[(\[]`),
		regexp.MustCompile(`^class\s+(\w+)\s*[:(\[]`),
	}, ends: regexp.MustCompile(`^[)\]}]`), comments: hashComment}
	scriptDecl = declRule{patterns: []*regexp.Regexp{ // JavaScript, TypeScript
		regexp.MustCompile(`^(?:export\s+)?(?:default\s+)?(?:declare\s+)?(?:async\s+)?function\*?\s*([\w$]+)\s*[(<]`),
		regexp.MustCompile(`^(?:export\s+)?(?:default\s+)?(?:declare\s+)?(?:abstract\s+)?(?:class|interface|enum|namespace)\s+([\w$]+)`),
		regexp.MustCompile(`^(?:export\s+)?(?:declare\s+)?(?:type|const|let|var)\s+([\w$]+)`),
	}, ends: braceEnd, comments: slashComment}
	rustDecl = declRule{patterns: []*regexp.Regexp{
		regexp.MustCompile(`^(?:pub(?:\([^)]*\))?\s+)?(?:(?:const|async|unsafe|extern(?:\s+"[^"]*")?)\s+)*(?:fn|struct|enum|trait|union|mod|type|static|const)\s+(\w+)`),
		regexp.MustCompile(`^(?:unsafe\s+)?impl(?:<[^>]*>)?\s+(?:[\w:]+(?:<[^>]*>)?\s+for\s+)?([\w:]+)`),
		regexp.MustCompile(`^macro_rules!\s*(\w+)`),
	}, ends: braceEnd, comments: regexp.MustCompile(`^(?://|/\*|\*|#\[|#!\[)`)}
	rubyDecl = declRule{patterns: []*regexp.Regexp{
		regexp.MustCompile(`^def\s+(?:self\.)?([\w?!=]+)`),
		regexp.MustCompile(`^(?:class|module)\s+([\w:]+)`),
	}, ends: regexp.MustCompile(`^end\b`), comments: hashComment}
	classDecl = declRule{patterns: []*regexp.Regexp{ // Java, Kotlin, C#, Scala, Swift, PHP, Dart, Groovy
		regexp.MustCompile(`^(?:(?:public|private|protected|internal|abstract|final|sealed|static|open|data|inline|partial|readonly|async|override|suspend|export|fileprivate)\s+)*` +
			`(?:class|interface|enum|record|object|struct|protocol|trait|extension|fun|func|function|def)\s+([\w$]+)`),
	}, ends: braceEnd, comments: slashComment}
	shellDecl = declRule{patterns: []*regexp.Regexp{
		regexp.MustCompile(`^function\s+([\w.:-]+)`),
		regexp.MustCompile(`^([\w.:-]+)\s*\(\)`),
	}, ends: braceEnd, comments: hashComment}
	sectionDecl = declRule{patterns: []*regexp.Regexp{ // INI, TOML, systemd units
		regexp.MustCompile(`^\[\[?\s*([^\]\s][^\]]*?)\s*\]\]?\s*(?:[#;].*)?$`),
	}, keep: true}
	yamlDecl = declRule{patterns: []*regexp.Regexp{
		regexp.MustCompile(`^([A-Za-z_][\w.-]*)\s*:(?:\s|$)`),
	}, ends: regexp.MustCompile(`^(?:---|\.\.\.)\s*$`), comments: hashComment}
	makeDecl = declRule{patterns: []*regexp.Regexp{
		regexp.MustCompile(`^([A-Za-z0-9_/%-][\w./%-]*)(?:\s+[\w./%-]+)*\s*::?(?:\s|$)`),
	}, comments: regexp.MustCompile(`^(?:#|\.)`)}
)

// declLangs maps a language (CodeLanguage's) to its declarations.
var declLangs = map[string]*declRule{
	"go": &goDecl, "python": &pythonDecl, "javascript": &scriptDecl, "typescript": &scriptDecl, "tsx": &scriptDecl,
	"jsx": &scriptDecl, "rust": &rustDecl, "ruby": &rubyDecl, "java": &classDecl, "kotlin": &classDecl,
	"csharp": &classDecl, "scala": &classDecl, "swift": &classDecl, "php": &classDecl, "dart": &classDecl,
	"groovy": &classDecl, "bash": &shellDecl, "zsh": &shellDecl, "ini": &sectionDecl, "toml": &sectionDecl,
	"conf": &sectionDecl, "yaml": &yamlDecl, "makefile": &makeDecl,
}

// maxDeclName bounds a declaration's name as a heading (a long match is no
// name).
const maxDeclName = 120

// decl is a line at the margin that starts, ends or is outside a
// declaration, at byte at of the source.
type decl struct {
	at   int
	kind declKind
	name string
}

// codeDecls reads src's lines at the margin by lang's rule, in order; none
// for a language without one.
func codeDecls(src, lang string) []decl {
	rule := declLangs[lang]
	if rule == nil {
		return nil
	}
	var out []decl
	for pos := 0; pos < len(src); {
		end := strings.IndexByte(src[pos:], '\n')
		next := len(src)
		if end < 0 {
			end = len(src)
		} else {
			end += pos
			next = end + 1
		}
		line := strings.TrimRight(src[pos:end], " \t\r")
		if pos == 0 {
			line = strings.TrimPrefix(line, "\ufeff")
		}
		if line != "" && line[0] != ' ' && line[0] != '\t' {
			if d := rule.read(line); d.kind != declNone {
				d.at = pos
				out = append(out, d)
			}
		}
		pos = next
	}
	return out
}

// read is what a line at the margin is to rule's declarations.
func (rule *declRule) read(line string) decl {
	for _, p := range rule.patterns {
		m := p.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		name := m[1]
		if len(m) > 2 && m[2] != "" {
			name += "." + m[2] // a Go method: its receiver's type first
		}
		if name == "" || len(name) > maxDeclName {
			break
		}
		return decl{kind: declStart, name: name}
	}
	switch {
	case rule.comments != nil && rule.comments.MatchString(line), rule.keep:
		return decl{kind: declNone}
	case rule.ends != nil && rule.ends.MatchString(line):
		return decl{kind: declEnd}
	}
	return decl{kind: declOther}
}

// codeHeadings is the heading path of the chunk at [s, e) of a source
// with decls: the first declaration starting in it, else the one whose
// body s is in (after it, before its end or a statement outside it); nil
// when none.
func codeHeadings(decls []decl, s, e int) []string {
	i := sort.Search(len(decls), func(i int) bool { return decls[i].at >= s })
	for j := i; j < len(decls) && decls[j].at < e; j++ {
		if decls[j].kind == declStart {
			return []string{decls[j].name}
		}
	}
	if i > 0 {
		if d := decls[i-1]; d.kind == declStart {
			return []string{d.name}
		}
	}
	return nil
}
