package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"os/signal"
	"syscall"

	"redpacket/internal/daemon"
	"redpacket/internal/ledgerexport"
	"redpacket/internal/pgstore"
)

const exportSynopsis = "-from YYYY-MM-DD -to YYYY-MM-DD [-format csv|jsonl]"

// runExport is `flusher export`: every money movement of the days from -from
// to -to (inclusive, in ID_TIME_ZONE) on standard output, with a progress
// line on standard error when that is a terminal.
func runExport(args []string) error {
	fs := flag.NewFlagSet("export", flag.ContinueOnError)
	from := fs.String("from", "", "the first day, YYYY-MM-DD in ID_TIME_ZONE")
	to := fs.String("to", "", "the last day (included), YYYY-MM-DD in ID_TIME_ZONE")
	format := fs.String("format", "csv", "csv (with a header row) or jsonl")
	if err := parseFlags(fs, exportSynopsis, args); err != nil {
		return helpIsDone(err)
	}
	cfg, log, err := loadConfig()
	if err != nil {
		return err
	}
	defer log.Sync() //nolint:errcheck
	since, until, err := ledgerexport.Range(*from, *to, cfg.IDLocation)
	if err != nil {
		return errors.Join(err, errUsage)
	}
	out := bufio.NewWriterSize(os.Stdout, 1<<16)
	w, err := ledgerexport.NewWriter(out, *format)
	if err != nil {
		return errors.Join(err, errUsage)
	}
	// No time limit: a long range takes as long as it takes.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	pool, err := pgstore.Connect(ctx, cfg.DatabaseURL, 0)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := pgstore.CheckSchema(ctx, pool); err != nil {
		return errors.Join(err, errorHint("run flusher migrate first"))
	}
	// Its days are the grabbers' days: another zone would cut them elsewhere.
	if err := pgstore.CheckShared(ctx, pool, "", []pgstore.SharedSetting{daemon.TimeZoneSetting(cfg)}, false); err != nil {
		return err
	}
	progress := ledgerexport.NewProgress(terminal(os.Stderr))
	err = ledgerexport.Export(ctx, pgstore.New(pool), since, until, func(m ledgerexport.Movement) error {
		progress.Count(m)
		return w.Write(m)
	})
	progress.Done()
	return errors.Join(err, w.Close(), out.Flush())
}

// terminal is f when it is a terminal, else nil (an untyped nil: a nil
// *os.File in an io.Writer would not compare equal to nil).
func terminal(f *os.File) io.Writer {
	if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
		return f
	}
	return nil
}
