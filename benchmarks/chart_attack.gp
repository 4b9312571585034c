# chart_attack.gp — draws build/bench-attack.png: the ratios of the rows of
# issue 30 ("fast under attack") against their peers, each beside its
# target, from the table benchmarks/run cuts out of the TARGET lines.
# Variables (gnuplot -e): data (rows "name value limit direction result"),
# out, subtitle.

set terminal pngcairo size 1200,560 font "DejaVu Sans,11" noenhanced
set output out
set title "Fast under attack: Tickgate against its peer (ratio), and the target\n".subtitle
set style fill solid 0.85 border -1
set boxwidth 0.6
set grid ytics lc rgb "#dddddd"
set logscale y
set yrange [0.05:50]
set ylabel "ratio to the peer (log)"
set xtics rotate by -20 left
set key top right
set offsets 0.5, 0.5, 0, 0
c_pass = "#00798c"; c_miss = "#d1495b"
plot data using 0:2:(strcol(5) eq "PASS" ? 0x00798c : 0xd1495b):xtic(1) with boxes lc rgb variable notitle, \
     data using 0:3 with points pt 7 ps 1.6 lc rgb "black" title "target (>= or <= as labelled)", \
     data using 0:2:(sprintf("%.2f %s %s", $2, strcol(4), strcol(5))) with labels offset 0,1 notitle
