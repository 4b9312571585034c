# chart.gp — draws build/bench.png from the tables benchmarks/run cuts out
# of build/bench.csv. Variables (gnuplot -e): dir, out, subtitle, early, idle,
# tickn.

set terminal pngcairo size 1500,1050 font "DejaVu Sans,11" noenhanced
set output out
set datafile missing "-"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set grid ytics mytics lc rgb "#dddddd"
set key top left horizontal
set logscale y
set format y "%.0s%c"

c_tg = "#d1495b"; c_uv = "#00798c"; c_ev = "#edae49"
w = 1.0 / 4 # bar width: 3 bars and a gap of one bar per group

# The largest value of columns 2..4 of a table, for head room above the
# value labels on log axes.
max(a, b) = a > b ? a : b
num(x) = x == x ? x : 0 # missing (NaN) -> 0
# (column by column: a row with "-" for the peers is skipped by a stats
# over all three columns at once)
stats dir."/ops.dat" using 2 nooutput
ops_top = STATS_max
stats dir."/ops.dat" using 3 nooutput
ops_top = max(ops_top, STATS_max)
stats dir."/ops.dat" using 4 nooutput
ops_top = max(ops_top, STATS_max) * 6
stats dir."/memory.dat" using (max(max(num($2), num($3)), num($4))) nooutput
mem_top = STATS_max * 4
stats dir."/lateness.dat" using (max($2, $3)) nooutput
lat_top = STATS_max * 4

set multiplot title "Tickgate vs libuv vs libevent (lower is better, log scales)\n" . subtitle

# Top: time per operation.
set size 1, 0.51
set origin 0, 0.44
set key top left horizontal
set title "Time per operation, ns (start/cancel/query by pending count n; churn = one cancel+start pair at n pending; expiry incl. callback)"
set xtics rotate by -30 nomirror
set yrange [1:ops_top]
plot dir."/ops.dat" using 2:xtic(1) title "tickgate" lc rgb c_tg, \
     '' using 3 title "libuv" lc rgb c_uv, \
     '' using 4 title "libevent" lc rgb c_ev, \
     '' using ($0 - w):2:(sprintf("%.0f", $2)) with labels rotate left offset 0,0.4 font ",8" notitle, \
     '' using ($0):3:(sprintf("%.0f", $3)) with labels rotate left offset 0,0.4 font ",8" notitle, \
     '' using ($0 + w):4:(sprintf("%.0f", $4)) with labels rotate left offset 0,0.4 font ",8" notitle

# Bottom left: memory.
set size 0.38, 0.45
set origin 0, 0
set title "Resident bytes per countdown\n(issue budget: 128 B excl. key bytes)"
set xtics norotate
set key top right vertical font ",9"
set yrange [10:mem_top]
plot dir."/memory.dat" using 2:xtic(1) title "tickgate" lc rgb c_tg, \
     '' using 3 title "libuv" lc rgb c_uv, \
     '' using 4 title "libevent" lc rgb c_ev, \
     '' using ($0 - w):2:(sprintf("%.0f", $2)) with labels offset 0,0.7 font ",9" notitle, \
     '' using ($0):3:(sprintf("%.0f", $3)) with labels offset 0,0.7 font ",9" notitle, \
     '' using ($0 + w):4:(sprintf("%.0f", $4)) with labels offset 0,0.7 font ",9" notitle, \
     128 with lines dt 2 lc rgb "#555555" title "128 B"

# Bottom right: tick lateness.
w2 = 1.0 / 3
set size 0.62, 0.45
set origin 0.38, 0
set title "Tickgate tick lateness, us, " . tickn . " countdowns ticking each second\n(targets p50 <= 50, p99 <= 250; early ticks: " . early . ")\nidle engine wake-ups: " . idle
set key top left vertical font ",9"
set yrange [1:lat_top]
plot dir."/lateness.dat" using 2:xtic(1) title "engine thread" lc rgb c_tg, \
     '' using 3 title "host thread (poll + dispatch)" lc rgb "#6a4c93", \
     '' using ($0 - w2/2):2:(sprintf("%.0f", $2)) with labels offset 0,0.7 font ",9" notitle, \
     '' using ($0 + w2/2):3:(sprintf("%.0f", $3)) with labels offset 0,0.7 font ",9" notitle, \
     50 with lines dt 2 lc rgb "#555555" title "50 us", \
     250 with lines dt 3 lc rgb "#555555" title "250 us"

unset multiplot
