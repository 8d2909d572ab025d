export PGHOST=/tmp/readyset-exp/sock PGPORT=55439 PGUSER=postgres PGDATABASE=postgres
