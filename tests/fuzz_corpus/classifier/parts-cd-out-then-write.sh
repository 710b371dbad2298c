--- parts
cd /
--- &&
touch notes.txt