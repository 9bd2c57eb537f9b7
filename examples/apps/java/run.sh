#!/bin/sh
# Compile ExampleConsumer.java once (into build/ next to it) and run it with Apache
# Kafka's client jars: KAFKA_LIBS, else those kgctl fetched for its local broker
# (`make kafka`: $KGCTL_CACHE_DIR or ~/.cache/kgctl, kafka-4.4.0/libs).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
libs=${KAFKA_LIBS:-${KGCTL_CACHE_DIR:-$HOME/.cache/kgctl}/kafka-4.4.0/libs}
if [ ! -d "$libs" ]; then
  echo "run.sh: no Kafka jars at $libs; set KAFKA_LIBS to a directory of them (make kafka fetches some)" >&2
  exit 9
fi
# One build per version of the source. Members start side by side: each compiles into
# a directory of its own and renames it into place; a rename that finds the place taken
# (another member was first) fails, and its copy is dropped.
build="$here/build/$(cksum < "$here/ExampleConsumer.java" | cut -d' ' -f1)"
if [ ! -f "$build/ExampleConsumer.class" ]; then
  mkdir -p "$here/build"
  tmp=$(mktemp -d "$here/build/.tmp.XXXXXX")
  javac -proc:none -nowarn -cp "$libs/*" -d "$tmp" "$here/ExampleConsumer.java"
  mv -T "$tmp" "$build" 2>/dev/null || rm -rf "$tmp"
fi
exec java -Xms32m -Xmx128m -XX:TieredStopAtLevel=1 -cp "$build:$libs/*" ExampleConsumer "$@"
