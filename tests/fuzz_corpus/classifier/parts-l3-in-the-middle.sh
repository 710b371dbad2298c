--- parts
ls -la
--- ;
rm -rf /
--- |
cat