// Package deploy holds what runs the service elsewhere than a developer's
// machine: the Prometheus configuration and alerting rules
// (deploy/prometheus), the Grafana provisioning and dashboard
// (deploy/grafana). Its tests check them, the Dockerfile and
// docker-compose.yml against the code: every metric named is exported, the
// compose file loads as `docker compose config` would load it, and the
// container settings hold (pinned images, non-root user, health checks,
// ports on loopback, no password in the file).
package deploy
