package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ternmq/tern/internal/perf/perfcli"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3".
var version = "dev"

// usageError marks errors that are the caller's to fix: exit status 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "tern",
		Short:         "tern is a Kafka and Pulsar broker over one local log, meshed across regions",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError{fmt.Errorf("%w (see %s --help)", err, c.CommandPath())}
	})
	root.AddCommand(newServeCmd(), newVersionCmd(), newStatusCmd(), newDevCmd(), newTopicsCmd(), newNamespacesCmd(), newPolicyCmd(),
		newProduceCmd(), newConsumeCmd(), newBenchCmd())
	return root
}

func main() {
	os.Exit(run(os.Args[1:]))
}

// run executes the CLI and maps errors to exit statuses.
func run(args []string) int {
	root := newRoot()
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return 0
	}
	fmt.Fprintln(os.Stderr, "tern:", err)
	var ue usageError
	var pe perfcli.UsageError
	if errors.As(err, &ue) || errors.As(err, &pe) || isCobraUsage(err) {
		return 2
	}
	return 1
}

// isCobraUsage recognises cobra's own argument errors (unknown command,
// wrong argument count), which do not pass through the flag error func.
func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "accepts ", "requires at least", "requires at most", "unknown flag", "unknown shorthand"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}
