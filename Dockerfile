# Airlock server image. The embedded-PostgreSQL default is for one machine;
# in containers point AIRLOCK_DATABASE_URL at a PostgreSQL service (see
# docker-compose.yml).
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/airlock-server ./cmd/server

FROM debian:bookworm-slim
# /keys is created here so a named volume mounted on it keeps this owner.
RUN useradd --system --home /var/lib/airlock --create-home airlock \
 && mkdir /keys && chown airlock /keys
COPY --from=build /out/airlock-server /usr/local/bin/airlock-server
USER airlock
ENV AIRLOCK_ADDR=0.0.0.0:8080 AIRLOCK_DATA_DIR=/var/lib/airlock
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/airlock-server"]
