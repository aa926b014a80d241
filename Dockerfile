# One image for every service of docker-compose.yml (grabber, flusher and
# the flusher's migrate), built once; the command picks the daemon.
#
# Base images are pinned by digest (the tag is for people; update both
# together). The version and commit are stamped into the binaries:
#   docker build --build-arg VERSION=v1.4.0 --build-arg COMMIT=$(git rev-parse --short HEAD) .
# They show in redpacket_build_info on /metrics.
FROM golang:1.26.8-bookworm@sha256:a688600ca24f8a4d3ca77f95b0dd40704a9fc787c826660eb7ba0b641b8b175d AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=unknown
# Static binaries (the runtime image has no libc); the .git directory is not
# in the build context (.dockerignore), so the commit comes from COMMIT.
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X redpacket/internal/telemetry.version=${VERSION} -X redpacket/internal/telemetry.commit=${COMMIT}" \
      -o /out/ ./cmd/grabber ./cmd/flusher

# distroless: no shell, no package manager, no curl; runs as uid 65532.
FROM gcr.io/distroless/static-debian12:nonroot@sha256:afa5c872c891853ca7fcf1f12c3edb23f7eeef36189728842dd51042ff57f7ab
COPY --from=build /out/grabber /out/flusher /usr/local/bin/
USER nonroot:nonroot
EXPOSE 8080 9091
# The same image runs the grabber or the flusher, so its check probes
# whichever daemon runs in the container (found in /proc): the grabber's
# /healthz on GRABBER_ADDR, the flusher's on FLUSHER_ADDR. A fixed
# `grabber healthcheck` marked every container running the flusher
# unhealthy (docker run, Swarm). compose sets each service's own check, and
# none for migrate, which exits once done.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 CMD ["flusher", "healthcheck", "-running"]
CMD ["grabber"]
