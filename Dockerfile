# A static gaffer binary on a minimal image.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.Version=${VERSION}" -o /gaffer ./cmd/gaffer

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /gaffer /gaffer
EXPOSE 8080
ENTRYPOINT ["/gaffer"]
CMD ["server"]
