# gen-sql.awk — writes the sqlite3 workload: an insert-heavy SQL script.
#   awk -v rows=200000 -f gen-sql.awk > script.sql
# Two tables with secondary indexes, `rows` single-row INSERTs (each parsed
# and prepared on its own, as a naive application does) in a few
# transactions, then updates, deletes and selects that use the indexes.
# The values come from a fixed-seed Park-Miller generator (its products
# stay below 2^53, so they are exact in awk's doubles): the script is the
# same on every machine.
function rnd(n) { seed = (seed * 16807) % 2147483647; return int(seed / 64) % n }
function word(len,   s, i) {
	s = ""
	for (i = 0; i < len; i++) s = s substr("abcdefghijklmnopqrstuvwxyz", rnd(26) + 1, 1)
	return s
}
BEGIN {
	if (rows < 1) rows = 200000
	seed = 42
	tx = 4
	print "PRAGMA cache_size = -65536;"
	print "CREATE TABLE customer(id INTEGER PRIMARY KEY, name TEXT NOT NULL, city TEXT, score INTEGER);"
	print "CREATE INDEX customer_name ON customer(name);"
	print "CREATE TABLE orders(id INTEGER PRIMARY KEY, customer INTEGER, item TEXT, qty INTEGER, price REAL, note TEXT);"
	print "CREATE INDEX orders_customer ON orders(customer, item);"
	print "CREATE INDEX orders_price ON orders(price);"
	ncust = int(rows / 10) + 1
	print "BEGIN;"
	for (i = 1; i <= ncust; i++)
		printf "INSERT INTO customer(id, name, city, score) VALUES(%d, '%s %s', '%s', %d);\n", i, word(6), word(8), word(5), rnd(1000)
	print "COMMIT;"
	per = int(rows / tx) + 1
	for (i = 1; i <= rows; i++) {
		if (i % per == 1) print "BEGIN;"
		printf "INSERT INTO orders(customer, item, qty, price, note) VALUES(%d, 'item-%d', %d, %d.%02d, '%s');\n", rnd(ncust) + 1, rnd(5000), rnd(20) + 1, rnd(1000), rnd(100), word(rnd(40) + 10)
		if (i % per == 0 || i == rows) print "COMMIT;"
	}
	print "BEGIN;"
	print "UPDATE orders SET qty = qty + 1 WHERE price < 100;"
	print "DELETE FROM orders WHERE item LIKE 'item-1%' AND qty > 15;"
	print "COMMIT;"
	print "SELECT count(*), sum(qty), round(avg(price), 2) FROM orders;"
	print "SELECT c.city, count(*), round(sum(o.qty * o.price), 2) FROM orders o JOIN customer c ON c.id = o.customer GROUP BY c.city ORDER BY 3 DESC LIMIT 10;"
	print "SELECT name, score FROM customer WHERE name >= 'm' ORDER BY name LIMIT 20;"
	print "SELECT item, count(*) FROM orders GROUP BY item ORDER BY 2 DESC LIMIT 10;"
	print "SELECT count(DISTINCT customer) FROM orders WHERE price BETWEEN 100 AND 200;"
}
