FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/triggerd ./cmd/triggerd && \
    CGO_ENABLED=0 go build -trimpath -o /out/triggerctl ./cmd/triggerctl && \
    mkdir -p /empty/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/ /usr/local/bin/
# The data dir belongs to nonroot (65532) in the image, so a named volume
# mounted there starts out writable by triggerd; one created by Docker
# for a path the image lacks would be root's.
COPY --from=build --chown=65532:65532 /empty/data /data
ENV TRIGGERD_DATA_DIR=/data
USER nonroot
ENTRYPOINT ["/usr/local/bin/triggerd"]
