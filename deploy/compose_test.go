package deploy_test

import (
	"bufio"
	"context"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"go.yaml.in/yaml/v3"
)

// There is no Docker engine where the tests run, and `docker compose config`
// needs the compose plugin: the file is loaded with compose-go, the library
// `docker compose` itself loads it with (schema validation, interpolation,
// merge keys, profiles), then checked as a project.

// exampleEnv is .env.example with its values filled in, as a user's .env.
func exampleEnv(t *testing.T, set map[string]string) map[string]string {
	t.Helper()
	f, err := os.Open("../.env.example")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			env[k] = v
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for k, v := range set {
		env[k] = v
	}
	return env
}

func loadCompose(t *testing.T, env map[string]string, profiles ...string) (*types.Project, error) {
	t.Helper()
	var list []string
	for k, v := range env {
		list = append(list, k+"="+v)
	}
	opts, err := cli.NewProjectOptions([]string{"../docker-compose.yml"},
		cli.WithWorkingDirectory(".."), cli.WithName("redpacket"), cli.WithEnv(list))
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		return nil, err
	}
	return p.WithProfiles(profiles)
}

func mustLoad(t *testing.T, env map[string]string, profiles ...string) *types.Project {
	t.Helper()
	p, err := loadCompose(t, env, profiles...)
	if err != nil {
		t.Fatalf("docker-compose.yml does not load (profiles %v): %v", profiles, err)
	}
	return p
}

var filled = map[string]string{"POSTGRES_PASSWORD": "pw4test", "GRABBER_API_TOKEN": "tok4test"}

func TestComposeLoadsWithAndWithoutObservability(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		profiles []string
		want     []string
	}{
		{nil, []string{"flusher", "grabber", "migrate", "postgres", "redis"}},
		{[]string{"observability"}, []string{"flusher", "grabber", "grafana", "migrate", "postgres", "prometheus", "redis"}},
	} {
		p := mustLoad(t, exampleEnv(t, filled), c.profiles...)
		got := slices.Sorted(func(yield func(string) bool) {
			for name := range p.Services {
				if !yield(name) {
					return
				}
			}
		})
		if !slices.Equal(got, c.want) {
			t.Errorf("profiles %v: services %v, want %v", c.profiles, got, c.want)
		}
	}
}

// Secrets come from .env: without the PostgreSQL password or the token
// (unset) compose refuses to start; a token set empty runs without one, on
// purpose.
func TestComposeRequiresPasswordAndToken(t *testing.T) {
	t.Parallel()
	for _, missing := range []string{"POSTGRES_PASSWORD", "GRABBER_API_TOKEN"} {
		env := exampleEnv(t, filled)
		delete(env, missing)
		if _, err := loadCompose(t, env); err == nil || !strings.Contains(err.Error(), missing) {
			t.Errorf("without %s: %v, want an error naming it", missing, err)
		}
	}
	env := exampleEnv(t, filled)
	env["POSTGRES_PASSWORD"] = ""
	if _, err := loadCompose(t, env); err == nil {
		t.Error("an empty POSTGRES_PASSWORD was accepted")
	}
	p := mustLoad(t, exampleEnv(t, map[string]string{"POSTGRES_PASSWORD": "pw4test", "GRABBER_API_TOKEN": ""}))
	if tok := p.Services["grabber"].Environment["GRABBER_API_TOKEN"]; tok == nil || *tok != "" {
		t.Errorf("GRABBER_API_TOKEN set empty: the grabber gets %v, want the empty string", tok)
	}
	p = mustLoad(t, exampleEnv(t, filled))
	if tok := p.Services["grabber"].Environment["GRABBER_API_TOKEN"]; tok == nil || *tok != "tok4test" {
		t.Errorf("the grabber's token is %v, want the one from .env", tok)
	}
	for _, s := range []string{"migrate", "flusher", "grabber"} {
		u := p.Services[s].Environment["DATABASE_URL"]
		if u == nil || !strings.Contains(*u, ":pw4test@postgres:") {
			t.Errorf("%s: DATABASE_URL %v does not carry the password from .env", s, u)
		}
	}
	if pw := p.Services["postgres"].Environment["POSTGRES_PASSWORD"]; pw == nil || *pw != "pw4test" {
		t.Errorf("postgres: POSTGRES_PASSWORD %v, want the one from .env", pw)
	}
}

func TestComposePublishesOnLoopbackByDefault(t *testing.T) {
	t.Parallel()
	p := mustLoad(t, exampleEnv(t, filled), "observability")
	published := 0
	for name, s := range p.Services {
		for _, port := range s.Ports {
			published++
			if port.HostIP != "127.0.0.1" {
				t.Errorf("%s publishes %s on %q, want 127.0.0.1", name, port.Published, port.HostIP)
			}
		}
	}
	if published != 4 {
		t.Errorf("%d ports published, want 4 (grabber, flusher, prometheus, grafana)", published)
	}
	for _, unpublished := range []string{"postgres", "redis"} {
		if len(p.Services[unpublished].Ports) > 0 {
			t.Errorf("%s publishes a port: only the service's own network reaches it", unpublished)
		}
	}
	p = mustLoad(t, exampleEnv(t, map[string]string{"POSTGRES_PASSWORD": "x", "GRABBER_API_TOKEN": "y",
		"REDPACKET_BIND_ADDR": "0.0.0.0"}))
	if ip := p.Services["grabber"].Ports[0].HostIP; ip != "0.0.0.0" {
		t.Errorf("REDPACKET_BIND_ADDR=0.0.0.0: grabber binds %q", ip)
	}
}

func TestComposeHealthchecksAndOneImage(t *testing.T) {
	t.Parallel()
	p := mustLoad(t, exampleEnv(t, filled), "observability")
	for _, d := range []string{"grabber", "flusher"} {
		hc := p.Services[d].HealthCheck
		if hc == nil || hc.Disable || !slices.Equal([]string(hc.Test), []string{"CMD", d, "healthcheck"}) {
			t.Errorf("%s: healthcheck %+v, want [CMD %s healthcheck]", d, hc, d)
		}
	}
	for _, s := range []string{"postgres", "redis", "prometheus", "grafana"} {
		if hc := p.Services[s].HealthCheck; hc == nil || len(hc.Test) == 0 {
			t.Errorf("%s has no healthcheck", s)
		}
	}
	if hc := p.Services["migrate"].HealthCheck; hc == nil || !hc.Disable {
		t.Errorf("migrate (runs once) inherits the image's grabber health check: %+v", hc)
	}
	var builders []string
	for name, s := range p.Services {
		if s.Build != nil {
			builders = append(builders, name)
		}
	}
	if !slices.Equal(builders, []string{"migrate"}) {
		t.Errorf("services that build: %v, want only migrate (one image, built once)", builders)
	}
	img := p.Services["migrate"].Image
	for _, s := range []string{"flusher", "grabber"} {
		if p.Services[s].Image != img || img == "" {
			t.Errorf("%s runs image %q, migrate builds %q: want one image", s, p.Services[s].Image, img)
		}
	}
	args := p.Services["migrate"].Build.Args
	for _, a := range []string{"VERSION", "COMMIT"} {
		if args[a] == nil {
			t.Errorf("the build does not pass %s (stamped into the binaries)", a)
		}
	}
}

// No password, token or secret is written in the file: each such setting
// is an interpolation of a variable from .env.
func TestComposeHasNoHardCodedSecret(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	secretKey := regexp.MustCompile(`(?i)password|secret|token`)
	fromEnv := regexp.MustCompile(`^\$\{[A-Z0-9_]+(:?[-?][^}]*)?\}$`)
	var walk func(n *yaml.Node)
	found := 0
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				if v.Kind == yaml.ScalarNode && secretKey.MatchString(k.Value) {
					found++
					if !fromEnv.MatchString(v.Value) {
						t.Errorf("line %d: %s is %q, not taken from .env", v.Line, k.Value, v.Value)
					}
				}
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(&doc)
	if found < 2 {
		t.Errorf("found %d secret settings, expected at least the PostgreSQL password and the token", found)
	}
	for _, m := range regexp.MustCompile(`postgres://[^\s"]*`).FindAllString(string(raw), -1) {
		if !strings.Contains(m, "postgres:${POSTGRES_PASSWORD") {
			t.Errorf("a database URL carries a password that is not ${POSTGRES_PASSWORD}: %s", m)
		}
	}
	for _, f := range []string{"../.gitignore", "../.dockerignore"} {
		b, err := os.ReadFile(f)
		if err != nil || !slices.Contains(strings.Fields(string(b)), ".env") {
			t.Errorf("%s does not ignore .env (%v)", f, err)
		}
	}
}

func TestDockerfile(t *testing.T) {
	t.Parallel()
	d := readDockerfile(t)
	if len(d.froms) < 2 {
		t.Errorf("%d stages, want a build stage and a runtime stage", len(d.froms))
	}
	pinned := regexp.MustCompile(`^[^@\s]+:[^@\s]+@sha256:[0-9a-f]{64}$`)
	for _, f := range d.froms {
		if !pinned.MatchString(f) {
			t.Errorf("FROM %s: not pinned by digest (image:tag@sha256:...)", f)
		}
	}
	if len(d.users) == 0 {
		t.Error("no USER line: the image would run as root")
	}
	for _, u := range d.users {
		if name, _, _ := strings.Cut(u, ":"); name == "root" || name == "0" {
			t.Errorf("USER %s runs as root", u)
		}
	}
	if !strings.Contains(d.healthcheck, `"healthcheck"`) {
		t.Errorf("HEALTHCHECK %q does not run the daemon's healthcheck subcommand", d.healthcheck)
	}
	// The -X flags name variables that exist.
	build, err := os.ReadFile("../internal/telemetry/build.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"version", "commit"} {
		if !strings.Contains(d.ldflags, "-X redpacket/internal/telemetry."+v+"=") {
			t.Errorf("the build does not stamp telemetry.%s: %s", v, d.ldflags)
		}
	}
	if !strings.Contains(string(build), "var version, commit string") {
		t.Error("internal/telemetry/build.go no longer declares the stamped variables")
	}
	ignore, err := os.ReadFile("../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{".git", "bin/", "bench/results/", ".env"} {
		if !slices.Contains(strings.Fields(string(ignore)), want) {
			t.Errorf(".dockerignore does not exclude %s", want)
		}
	}
}

// dockerfile holds what TestDockerfile checks of the Dockerfile: each
// stage's image, each USER, and the HEALTHCHECK and -ldflags lines.
type dockerfile struct {
	froms, users         []string
	healthcheck, ldflags string
}

func readDockerfile(t *testing.T) dockerfile {
	t.Helper()
	raw, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var froms, users []string
	var healthcheck, ldflags string
	for line := range strings.SplitSeq(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch strings.ToUpper(f[0]) {
		case "FROM":
			froms = append(froms, f[1])
		case "USER":
			users = append(users, f[1])
		case "HEALTHCHECK":
			healthcheck = line
		}
		if strings.Contains(line, "-ldflags") {
			ldflags = line
		}
	}
	return dockerfile{froms: froms, users: users, healthcheck: healthcheck, ldflags: ldflags}
}
