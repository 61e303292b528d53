package main

import (
	"strings"
	"testing"
)

func TestReportCountsTopLevelTestsInTheClosingLine(t *testing.T) {
	stream := strings.Join([]string{
		`{"Action":"start","Package":"m/a"}`,
		`{"Action":"run","Package":"m/a","Test":"TestOne"}`,
		`{"Action":"pass","Package":"m/a","Test":"TestOne","Elapsed":0.1}`,
		`{"Action":"run","Package":"m/a","Test":"TestTwo"}`,
		`{"Action":"run","Package":"m/a","Test":"TestTwo/sub"}`,
		`{"Action":"output","Package":"m/a","Test":"TestTwo/sub","Output":"    boom\n"}`,
		`{"Action":"fail","Package":"m/a","Test":"TestTwo/sub","Elapsed":0}`,
		`{"Action":"fail","Package":"m/a","Test":"TestTwo","Elapsed":0}`,
		`{"Action":"skip","Package":"m/a","Test":"TestThree","Elapsed":0}`,
		`{"Action":"fail","Package":"m/a","Elapsed":0.25}`,
		`{"Action":"start","Package":"m/b"}`,
		`{"Action":"pass","Package":"m/b","Test":"TestFour","Elapsed":0}`,
		`{"Action":"pass","Package":"m/b","Elapsed":1.5}`,
		`{"Action":"skip","Package":"m/c","Elapsed":0}`,
		"plain text go test printed",
	}, "\n") + "\n"

	var out strings.Builder
	r := newReport(&out)
	if failed := r.read(strings.NewReader(stream)); !failed {
		t.Error("read reported no failure for a failed package")
	}
	r.summary()
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")

	for _, want := range []string{"FAIL\tm/a\t0.250s", "    boom", "ok  \tm/b\t1.500s", "?   \tm/c\t[no test files]", "plain text go test printed"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if got, want := lines[len(lines)-1], "tests: 2 passed, 1 failed, 1 skipped"; got != want {
		t.Errorf("closing line = %q, want %q", got, want)
	}
	if got := lines[len(lines)-2]; !strings.HasPrefix(got, "1 packages passed, 1 failed in ") {
		t.Errorf("package totals = %q", got)
	}
}
