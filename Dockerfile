# Static, non-root memoryd image.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# .dockerignore leaves .git out, so `memoryd version` learns the commit from
# here: docker build --build-arg COMMIT=$(git rev-parse HEAD) .
ARG COMMIT=unknown
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X main.commit=${COMMIT}" -o /out/memoryd ./cmd/memoryd

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/memoryd /memoryd
USER nonroot:nonroot
ENTRYPOINT ["/memoryd"]
CMD ["serve"]
