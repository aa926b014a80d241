# Builds both daemons into one small image; docker-compose.yml picks the
# command per service.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/ ./cmd/grabber ./cmd/flusher

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/grabber /out/flusher /usr/local/bin/
USER nonroot
