#!/usr/bin/env bash
# A real corpus of short entries from a Debian package: the German -> English dictionary of
# FreeDict (dict-freedict-deu-eng, from Ding; GPL 3 / AGPL 3), a headword and its first
# translation a line. Writes DIR/train.tsv, DIR/valid.tsv and DIR/test.tsv: of the distinct
# pairs, 60000 chosen by a digest of each (the same on every machine), 1500 for the test, 1500
# for validation, the rest to train. Pronunciations, grammar marks, bracketed glosses and the
# translations after the first are dropped.
#   scripts/dictionary_corpus.sh DIR      (installs the package when missing; root, or sudo)
set -euo pipefail
out=${1:?usage: scripts/dictionary_corpus.sh DIR}
package=dict-freedict-deu-eng
if ! dpkg-query -W -f='${Status}' "$package" 2> /dev/null | grep -q "install ok installed"; then
  echo "installing $package" >&2
  sudo=$([[ $(id -u) == 0 ]] || echo sudo)
  $sudo apt-get install -y -q "$package" > /dev/null
fi
mkdir -p "$out"
# each entry of the index (headword, offset, length in base64) read from the dictionary, whose
# first line is the headword and the next lines its senses
zcat /usr/share/dictd/freedict-deu-eng.dict.dz | perl -e '
  use strict; use warnings; use Encode qw(decode); use Digest::MD5 qw(md5_hex);
  my $dict = do { local $/; <STDIN> };
  my %b64; @b64{split //, join "", "A".."Z", "a".."z", 0..9, "+", "/"} = 0..63;
  sub number { my $v = 0; $v = $v * 64 + $b64{$_} for split //, shift; $v }
  open my $index, "<:encoding(UTF-8)", "/usr/share/dictd/freedict-deu-eng.index" or die $!;
  my %pairs;
  while (<$index>) {
    chomp;
    my ($word, $at, $length) = split /\t/;
    next if !defined $length || $word =~ /^00/;
    my @lines = split /\n/, decode("UTF-8", substr($dict, number($at), number($length)));
    (my $head = shift @lines) =~ s/\s*[\/<].*//;
    $head =~ s/^\s+|\s+$//g;
    for my $line (@lines) {
      next if $line =~ /^ {9}/;
      (my $s = $line) =~ s/^\s+|\s+$//g;
      next if $s eq "" || $s =~ /^(Note|Synonym|see:|Example)/;
      $s =~ s/\[[^]]*\]|<[^>]*>|\([^)]*\)//g;
      $s =~ s/^\d+\.\s*//;
      $s =~ s/[;,].*//;
      $s =~ s/^\s+|\s+$//g;
      next if $s eq "";
      $pairs{"$head\t$s"} = 1 if $head ne "" && "$head$s" !~ /\t/;
      last;
    }
  }
  my @chosen = (sort { $a->[0] cmp $b->[0] }
                map { [md5_hex(Encode::encode("UTF-8", $_)), $_] } keys %pairs)[0 .. 59999];
  binmode STDOUT, ":encoding(UTF-8)";
  print $_->[1], "\n" for @chosen;
' > "$out/.all"
head -n 1500 "$out/.all" > "$out/test.tsv"
sed -n 1501,3000p "$out/.all" > "$out/valid.tsv"
tail -n +3001 "$out/.all" > "$out/train.tsv"
rm -f "$out/.all"
wc -l "$out"/train.tsv "$out"/valid.tsv "$out"/test.tsv
