# Multi-stage build: a static binary on a distroless base, run as non-root.
#   docker build -t tradergate .
#   docker run -p 8080:8080 -p 9090:9090 -e TRADERGATE_UPSTREAM_KEY=... \
#     -v $PWD/config.yaml:/etc/tradergate/config.yaml:ro tradergate
# In a container set admin.listen to ":9090" (its default is loopback). With
# server.tls on, publish 443 and 80, and mount a volume at server.tls.storage
# (acme) or the certificate files (files).
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/tradergate .

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/tradergate /usr/local/bin/tradergate
USER nonroot:nonroot
EXPOSE 8080 9090
ENTRYPOINT ["/usr/local/bin/tradergate"]
CMD ["-config", "/etc/tradergate/config.yaml"]
