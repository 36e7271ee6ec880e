// Command benchreport prints issue 14's performance table from a results
// file that the benchmark commands appended to (their -results flag): every
// row with what is measured, how, the target, the figures and PASS, FAIL,
// MISSING or NOT AT SCALE. It exits 1 when a row failed or was not
// measured (with -strict also when one was measured at a smaller scale than
// its target is stated at), 2 when the file cannot be read.
//
//	benchreport [-strict] FILE
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/airlockhq/airlock/internal/benchtable"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the command: it returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("benchreport", flag.ContinueOnError)
	fs.SetOutput(stderr)
	strict := fs.Bool("strict", false, "a row measured below its stated scale fails too")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: benchreport [-strict] RESULTS-FILE")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		fmt.Fprintln(stderr, "benchreport:", err)
		return 2
	}
	defer f.Close()
	results, err := benchtable.Read(f)
	if err != nil {
		fmt.Fprintln(stderr, "benchreport:", err)
		return 2
	}
	rep := benchtable.Judge(results)
	if err := rep.Print(stdout); err != nil {
		fmt.Fprintln(stderr, "benchreport:", err)
		return 2
	}
	if !rep.OK(*strict) {
		return 1
	}
	return 0
}
