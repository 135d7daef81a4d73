#!/usr/bin/env bash
# Stages the Planetoid raw files (Cora, CiteSeer, PubMed) into the git-ignored data/ folder.
#
# Source, first that works, file by file:
#   1. $PLANETOID_SRC            (default: ../shared/data/planetoid/raw next to the repo)
#   2. $PLANETOID_URL/<file>     (default: https://github.com/kimiyoung/planetoid/raw/master/data)
# Every file is checked against scripts/planetoid.sha256 before it lands in $DATA_DIR
# (default: data/); files already there with the right checksum are left alone.
# Exits non-zero, naming what is missing and how to provide it, when a file cannot be had.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SUMS="$ROOT/scripts/planetoid.sha256"
SRC="${PLANETOID_SRC:-$ROOT/../shared/data/planetoid/raw}"
URL="${PLANETOID_URL:-https://github.com/kimiyoung/planetoid/raw/master/data}"
DATA_DIR="${DATA_DIR:-$ROOT/data}"
DATASETS="${DATASETS:-cora citeseer pubmed}"
EXTS="x tx allx y ty ally graph test.index"

mkdir -p "$DATA_DIR"

expected_sum() { awk -v f="$1" '$2 == f { print $1 }' "$SUMS"; }
sum_of() { sha256sum "$1" | awk '{ print $1 }'; }

# Puts a verified copy of $2 (a path) at $DATA_DIR/$1; fails on a checksum mismatch.
land() {
  local name="$1" from="$2" want got
  want="$(expected_sum "$name")"
  got="$(sum_of "$from")"
  if [ -n "$want" ] && [ "$got" != "$want" ]; then
    echo "stage-data: $name from $3 has sha256 $got, expected $want; not used" >&2
    return 1
  fi
  cp "$from" "$DATA_DIR/.$name.part"
  mv -f "$DATA_DIR/.$name.part" "$DATA_DIR/$name"
}

copied=0 downloaded=0 present=0
missing=()
can_download=1 # cleared after the first failed download: offline, do not wait on every file
for ds in $DATASETS; do
  for ext in $EXTS; do
    name="ind.$ds.$ext"
    dest="$DATA_DIR/$name"
    want="$(expected_sum "$name")"
    if [ -f "$dest" ] && { [ -z "$want" ] || [ "$(sum_of "$dest")" = "$want" ]; }; then
      present=$((present + 1))
      continue
    fi
    if [ -f "$SRC/$name" ] && land "$name" "$SRC/$name" "$SRC"; then
      copied=$((copied + 1))
      continue
    fi
    tmp="$DATA_DIR/.$name.download"
    if [ "$can_download" = 1 ] && command -v curl >/dev/null 2>&1 &&
      curl -fsSL --retry 2 --connect-timeout 10 --max-time 300 -o "$tmp" "$URL/$name" 2>/dev/null &&
      land "$name" "$tmp" "$URL"; then
      rm -f "$tmp"
      downloaded=$((downloaded + 1))
      continue
    fi
    rm -f "$tmp"
    can_download=0
    missing+=("$name")
  done
done

echo "stage-data: $DATA_DIR: $present already there, $copied copied, $downloaded downloaded"
if [ "${#missing[@]}" -gt 0 ]; then
  cat >&2 <<MSG

stage-data: ${#missing[@]} Planetoid file(s) could not be staged:
  ${missing[*]}
They were neither in $SRC
nor downloadable from $URL/ (offline?).
To provide the data, put the original Planetoid raw files
  ind.<name>.{x,tx,allx,y,ty,ally,graph,test.index}   for <name> in: $DATASETS
into $DATA_DIR/ (or into $SRC, or point PLANETOID_SRC=/path/to/raw at a folder that has them),
then run: scripts/stage-data.sh
Their sha256 sums are listed in scripts/planetoid.sha256.
MSG
  exit 1
fi
