#!/bin/sh
# Regenerates layout/hot-code.order: the functions an idle daemon with one bot runs, then the ones a
# reply runs, then the ones an idle tool node runs while its daemon pings it (issue #34), each list
# in the order callgrind first names them. build.rs hands the file to the linker
# (lld's --symbol-ordering-file) for release builds, so that this code sits on a few contiguous
# pages instead of being spread over the whole binary (issue #30, BENCHMARKS.md "idle code layout").
#
# The names carry a hash of the build's configuration (cargo's -C metadata: the profile, the
# dependencies, the toolchain), so regenerate the file when one of those changes: a stale name
# is skipped by the linker, and the idle footprint creeps back up (the footprint bench shows it).
# Needs valgrind (callgrind_control, perl). Runs the footprint bench, then the nodes bench (its node
# only), against the release binary, which keeps its symbol table, under callgrind:
#   cargo build --release --bin clawvisor && layout/profile.sh target/release/clawvisor
set -eu
binary=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.."
work=$(mktemp -d)
cat > "$work/wrapped" <<WRAP
#!/bin/sh
exec valgrind --tool=callgrind --demangle=no --dump-instr=no --callgrind-out-file=$work/cg.%p.out "$binary" "\$@"
WRAP
chmod +x "$work/wrapped"
# The bench prints "update pushed → reply" after the exchange, then waits until the daemon idles.
CLAWVISOR_FOOTPRINT_BINARY="$work/wrapped" CLAWVISOR_FOOTPRINT_BOTS=1 \
  cargo test --bench footprint -- --nocapture > "$work/bench.log" 2>&1 &
bench=$!
pid=""
while [ -z "$pid" ]; do
  sleep 1
  pid=$(pgrep -f "callgrind-out-file=$work" | head -1 || true)
done
# Boot is not counted (zeroed at /readyz); the exchange is dumped once the reply arrived; what
# runs after it until the bench stops the daemon (the idle minute: poll cycles, the first
# checkpoint, the minute jobs; then the shutdown) is callgrind's final dump at exit.
until grep -q "start to /readyz" "$work/bench.log"; do sleep 1; done
callgrind_control -z "$pid" > /dev/null
until grep -q "update pushed" "$work/bench.log"; do sleep 1; done
callgrind_control --dump=reply "$pid" > /dev/null
while kill -0 "$pid" 2>/dev/null; do sleep 1; done
kill "$bench" 2>/dev/null || true
pkill -f "callgrind-out-file=$work" || true
wait || true
# The node: `node serve` under callgrind (its `node pair` runs plain), driven by the nodes bench's
# daemon. Counted: the bench's idle stretch after its calls (the daemon's pings, the node's page
# release), dumped while the bench reads the node's RSS (5 s), before it kills the node.
cat > "$work/node" <<WRAP
#!/bin/sh
case " \$* " in
  *" serve "*) exec valgrind --tool=callgrind --demangle=no --dump-instr=no --callgrind-out-file=$work/node.%p.out "$binary" "\$@" ;;
  *) exec "$binary" "\$@" ;;
esac
WRAP
chmod +x "$work/node"
CLAWVISOR_NODES_BINARY="$work/node" cargo test --bench nodes > "$work/nodes.log" 2>&1 &
bench=$!
node=""
while [ -z "$node" ]; do
  sleep 1
  node=$(pgrep -f "callgrind-out-file=$work/node" | head -1 || true)
done
until grep -q "node over local" "$work/nodes.log"; do sleep 1; done
callgrind_control -z "$node" > /dev/null
until grep -q "node idle: reading" "$work/nodes.log"; do sleep 1; done
callgrind_control --dump=idle "$node" > /dev/null
kill "$bench" 2>/dev/null || true
pkill -f "callgrind-out-file=$work/node" || true
wait || true
# The functions that ran in a dump (its `fn=` cost blocks). Callgrind names a function once per
# run (`fn=(id) name`, later only `fn=(id)`), so each process's names are read from all its dumps.
# The list: first what both the daemon and the node run (in the daemon's order), then what only the
# daemon runs (its idle minute, then its reply), then what only the node runs; each name once. So
# the daemon's code and the node's code are each one stretch of pages (the daemon's and the node's
# paths share the first part).
# (perl: callgrind_control needs it anyway)
perl -e '
  sub ran {
    my (@files) = @_; my (%name, @names);
    for my $file (@files) {
      open(my $in, "<", $file) or die "$file: $!";
      my @here;
      while (<$in>) {
        $name{$1} = $2 if /^c?fn=\((\d+)\) (.+)$/;
        push @here, $1 if /^fn=\((\d+)\)/;
      }
      push @names, [@here];
    }
    my (%seen, @listed);
    for my $ids (reverse @names) {
      for my $id (@$ids) {
        my $symbol = $name{$id} // next;
        $symbol =~ s/\x27\d+$//;
        next if $symbol =~ /^0x|@/ || $seen{$symbol}++;
        push @listed, $symbol;
      }
    }
    return @listed;
  }
  my ($reply, $idle, $node) = @ARGV;
  my @daemon = ran($reply, $idle);
  my @node = ran($node);
  my %on_node = map { $_ => 1 } @node;
  my %on_daemon = map { $_ => 1 } @daemon;
  print "$_\n" for (grep { $on_node{$_} } @daemon), (grep { !$on_node{$_} } @daemon),
    (grep { !$on_daemon{$_} } @node);
' "$work/cg.$pid.out.1" "$work/cg.$pid.out" "$work/node.$node.out.1" > "$here/hot-code.order"
wc -l "$here/hot-code.order"
