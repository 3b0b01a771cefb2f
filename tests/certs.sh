#!/bin/sh
# Makes the test PKI in directory $1 with openssl (Debian's openssl 3):
#   ca, other-ca                 two CAs
#   server, server2              127.0.0.1 + localhost, signed by ca (server2: rotation)
#   server-rsa                   the same with an RSA-2048 key
#   client                       DNS prom.example.net, email, URI; signed by ca
#   client-sans                  DNS intruder.example.net only; signed by ca
#   client-wrongca               signed by other-ca
#   client-expired               signed by ca, valid 2020-01-01..2020-01-02
set -eu
cd "$1"
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
ca() {
  key "$1.key"
  openssl req -x509 -new -key "$1.key" -subj "/CN=$1" -days 2 -out "$1.crt" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
}
leaf() { # name ca extensions
  key "$1.key"
  openssl req -new -key "$1.key" -subj "/CN=$1" -out "$1.csr" 2>/dev/null
  printf '%b' "$3" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA "$2.crt" -CAkey "$2.key" -CAcreateserial -days 2 \
    -extfile "$1.ext" -out "$1.crt" 2>/dev/null
}
SERVER='subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n'
CLIENT='extendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE\n'
ca ca
ca other-ca
leaf server ca "$SERVER"
leaf server2 ca "$SERVER"
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out server-rsa.key 2>/dev/null
openssl req -new -key server-rsa.key -subj /CN=server-rsa -out server-rsa.csr 2>/dev/null
printf '%b' "$SERVER" > server-rsa.ext
openssl x509 -req -in server-rsa.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
  -extfile server-rsa.ext -out server-rsa.crt 2>/dev/null
leaf client ca "subjectAltName=DNS:prom.example.net,email:prom@example.net,URI:spiffe://example/prom,IP:10.0.0.7\n$CLIENT"
leaf client-sans ca "subjectAltName=DNS:intruder.example.net\n$CLIENT"
leaf client-wrongca other-ca "subjectAltName=DNS:prom.example.net\n$CLIENT"
# An expired client certificate: `openssl ca` can set past dates.
key client-expired.key
openssl req -new -key client-expired.key -subj /CN=client-expired -out client-expired.csr 2>/dev/null
printf '%b' "subjectAltName=DNS:prom.example.net\n$CLIENT" > client-expired.ext
printf '[ca]\ndefault_ca=d\n[d]\ndatabase=index.txt\nnew_certs_dir=.\nserial=serial\ndefault_md=sha256\npolicy=p\n[p]\ncommonName=supplied\n' > ca.cnf
: > index.txt
echo 1000 > serial
openssl ca -batch -config ca.cnf -cert ca.crt -keyfile ca.key -in client-expired.csr \
  -out client-expired.crt -startdate 20200101000000Z -enddate 20200102000000Z \
  -extfile client-expired.ext -notext 2>/dev/null
