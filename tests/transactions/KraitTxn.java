import java.time.Duration;
import java.util.*;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;

/**
 * The Java kafka-clients side of tests/transactions/test_java_client.py: one sub-command per
 * scenario, results printed as tab-separated lines the test parses.
 *
 *   visibility BOOTSTRAP TOPIC TXN_ID       commit {c1,c2}, abort {a1,a2}, commit {c3}, then read both ways
 *   consume BOOTSTRAP TOPIC ISOLATION MS    read the whole topic for MS ms: REC, POS and END lines
 *   eos BOOTSTRAP IN OUT GROUP TXN_ID ABORT_ROUND EXPECTED
 *                                           consume-transform-produce with sendOffsetsToTransaction
 *   fence BOOTSTRAP TOPIC TXN_ID            a second producer with the id fences the first
 *   admin BOOTSTRAP TXN_ID...               listTransactions and describeTransactions
 *
 * Run with the sub-command's arguments, or as "serve": then each line of standard input is
 * one tab-separated command, answered by its lines and a DONE line (one JVM for many
 * commands: the tests pay for its start-up once).
 */
public class KraitTxn {
  static Properties producerProps(String bootstrap, String txnId) {
    Properties p = new Properties();
    p.put("bootstrap.servers", bootstrap);
    p.put("transactional.id", txnId);
    p.put("transaction.timeout.ms", "30000");
    p.put("max.block.ms", "30000");
    p.put("delivery.timeout.ms", "30000");
    p.put("request.timeout.ms", "10000");
    p.put("linger.ms", "5");
    p.put("key.serializer", "org.apache.kafka.common.serialization.StringSerializer");
    p.put("value.serializer", "org.apache.kafka.common.serialization.StringSerializer");
    return p;
  }

  static Properties consumerProps(String bootstrap, String group, String isolation) {
    Properties p = new Properties();
    p.put("bootstrap.servers", bootstrap);
    if (group != null) p.put("group.id", group);
    p.put("isolation.level", isolation);
    p.put("enable.auto.commit", "false");
    p.put("auto.offset.reset", "earliest");
    p.put("fetch.max.wait.ms", "100");
    p.put("key.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
    p.put("value.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
    return p;
  }

  static void out(Object... fields) {
    StringBuilder sb = new StringBuilder();
    for (int i = 0; i < fields.length; i++) {
      if (i > 0) sb.append('\t');
      sb.append(fields[i]);
    }
    System.out.println(sb);
    System.out.flush();
  }

  public static void main(String[] a) throws Exception {
    if (a[0].equals("serve")) {
      java.io.BufferedReader in = new java.io.BufferedReader(new java.io.InputStreamReader(System.in));
      for (String line; (line = in.readLine()) != null; ) {
        try {
          command(line.split("\t"));
        } catch (Exception e) {
          out("ERROR", e.getClass().getSimpleName(), String.valueOf(e.getMessage()).replace('\n', ' '));
        }
        out("DONE");
      }
      return;
    }
    command(a);
    out("DONE");
  }

  static void command(String[] a) throws Exception {
    switch (a[0]) {
      case "visibility": visibility(a[1], a[2], a[3]); break;
      case "consume": consume(a[1], a[2], a[3], Long.parseLong(a[4])); break;
      case "eos": eos(a[1], a[2], a[3], a[4], a[5], Integer.parseInt(a[6]), Integer.parseInt(a[7])); break;
      case "fence": fence(a[1], a[2], a[3]); break;
      case "admin": admin(a[1], Arrays.copyOfRange(a, 2, a.length)); break;
      default: throw new IllegalArgumentException(a[0]);
    }
  }

  static void visibility(String bootstrap, String topic, String txnId) throws Exception {
    try (KafkaProducer<String, String> p = new KafkaProducer<>(producerProps(bootstrap, txnId))) {
      p.initTransactions();
      p.beginTransaction();
      p.send(new ProducerRecord<>(topic, 0, null, "c1"));
      p.send(new ProducerRecord<>(topic, 0, null, "c2"));
      p.commitTransaction();
      p.beginTransaction();
      p.send(new ProducerRecord<>(topic, 0, null, "a1")).get();
      p.send(new ProducerRecord<>(topic, 0, null, "a2")).get();  // written before the abort
      p.abortTransaction();
      p.beginTransaction();
      p.send(new ProducerRecord<>(topic, 0, null, "c3"));
      p.commitTransaction();
    }
    for (String iso : new String[] {"read_committed", "read_uncommitted"}) consume(bootstrap, topic, iso, 0);
  }

  /** Reads every partition from its beginning: until the end offsets (ms == 0) or for ms. */
  static void consume(String bootstrap, String topic, String isolation, long ms) {
    try (KafkaConsumer<String, String> c = new KafkaConsumer<>(consumerProps(bootstrap, null, isolation))) {
      List<TopicPartition> tps = new ArrayList<>();
      for (PartitionInfo pi : c.partitionsFor(topic)) tps.add(new TopicPartition(topic, pi.partition()));
      c.assign(tps);
      c.seekToBeginning(tps);
      Map<TopicPartition, Long> end = c.endOffsets(tps);  // the LSO under read_committed
      long deadline = System.currentTimeMillis() + (ms > 0 ? ms : 20000);
      while (System.currentTimeMillis() < deadline) {
        for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(100)))
          out("REC", isolation, r.partition(), r.offset(), r.value());
        if (ms == 0) {
          boolean all = true;
          for (TopicPartition tp : tps) all &= c.position(tp) >= end.get(tp);
          if (all) break;
        }
      }
      end = c.endOffsets(tps);
      for (TopicPartition tp : tps) {
        out("POS", isolation, tp.partition(), c.position(tp));
        out("END", isolation, tp.partition(), end.get(tp));
      }
    }
  }

  static void eos(String bootstrap, String in, String outTopic, String group, String txnId, int abortRound,
                  int expected) throws Exception {
    Properties cp = consumerProps(bootstrap, group, "read_committed");
    cp.put("max.poll.records", "7");
    try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp);
         KafkaProducer<String, String> p = new KafkaProducer<>(producerProps(bootstrap, txnId))) {
      p.initTransactions();
      c.subscribe(Collections.singletonList(in));
      int done = 0, round = 0;
      long deadline = System.currentTimeMillis() + 60000;
      while (done < expected && System.currentTimeMillis() < deadline) {
        ConsumerRecords<String, String> recs = c.poll(Duration.ofMillis(200));
        if (recs.isEmpty()) continue;
        round++;
        p.beginTransaction();
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        for (ConsumerRecord<String, String> r : recs) {
          p.send(new ProducerRecord<>(outTopic, r.partition(), r.key(), "out-" + r.value()));
          offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
        }
        p.sendOffsetsToTransaction(offsets, c.groupMetadata());
        if (round == abortRound) {
          p.flush();  // the aborted records reach the log: only the markers hide them
          p.abortTransaction();
          // rewind to the committed offsets, as an EOS application does after an abort
          Map<TopicPartition, OffsetAndMetadata> committed = c.committed(c.assignment());
          for (TopicPartition tp : c.assignment()) {
            OffsetAndMetadata om = committed.get(tp);
            if (om == null) c.seekToBeginning(Collections.singletonList(tp));
            else c.seek(tp, om.offset());
          }
          out("ABORTED", round, recs.count());
        } else {
          p.commitTransaction();
          done += recs.count();
          out("COMMITTED", round, recs.count());
        }
      }
      Map<TopicPartition, OffsetAndMetadata> committed = c.committed(c.assignment());
      for (Map.Entry<TopicPartition, OffsetAndMetadata> e : committed.entrySet())
        out("OFFSET", e.getKey().partition(), e.getValue() == null ? -1 : e.getValue().offset());
    }
  }

  static void fence(String bootstrap, String topic, String txnId) throws Exception {
    KafkaProducer<String, String> zombie = new KafkaProducer<>(producerProps(bootstrap, txnId));
    zombie.initTransactions();
    zombie.beginTransaction();
    zombie.send(new ProducerRecord<>(topic, 0, null, "zombie-1")).get();
    try (KafkaProducer<String, String> p2 = new KafkaProducer<>(producerProps(bootstrap, txnId))) {
      p2.initTransactions();  // bumps the epoch and aborts the zombie's transaction
      out("P2", "INITIALISED");
      try {
        zombie.send(new ProducerRecord<>(topic, 0, null, "zombie-2")).get();
        zombie.commitTransaction();
        out("ZOMBIE", "COMMITTED");
      } catch (Exception e) {
        Throwable t = e;
        while ((t instanceof ExecutionException || t.getClass() == KafkaException.class) && t.getCause() != null)
          t = t.getCause();
        out("ZOMBIE", "FAILED", t.getClass().getSimpleName());
      }
      try {
        zombie.commitTransaction();  // fenced is fatal: every later call fails too
        out("ZOMBIE", "COMMITTED");
      } catch (Exception e) {
        out("ZOMBIE", "FAILED-AGAIN", e.getClass().getSimpleName());
      }
      p2.beginTransaction();
      p2.send(new ProducerRecord<>(topic, 0, null, "p2-1"));
      p2.commitTransaction();
      out("P2", "COMMITTED");
    } finally {
      zombie.close(Duration.ZERO);
    }
  }

  static void admin(String bootstrap, String[] ids) throws Exception {
    Properties p = new Properties();
    p.put("bootstrap.servers", bootstrap);
    p.put("request.timeout.ms", "10000");
    try (Admin admin = Admin.create(p)) {
      for (TransactionListing l : admin.listTransactions().all().get())
        out("LIST", l.transactionalId(), l.producerId(), l.state());
      ListTransactionsOptions ongoing = new ListTransactionsOptions()
          .filterStates(Collections.singleton(TransactionState.ONGOING));
      for (TransactionListing l : admin.listTransactions(ongoing).all().get())
        out("ONGOING", l.transactionalId(), l.producerId(), l.state());
      for (String id : ids) {
        try {
          TransactionDescription d = admin.describeTransactions(Collections.singleton(id)).description(id).get();
          List<String> parts = new ArrayList<>();
          for (TopicPartition tp : d.topicPartitions()) parts.add(tp.toString());
          Collections.sort(parts);
          out("DESC", id, d.state(), d.producerId(), d.producerEpoch(), d.transactionTimeoutMs(),
              d.transactionStartTimeMs().isPresent() ? "started" : "none", d.coordinatorId(), String.join(",", parts));
        } catch (ExecutionException e) {
          out("DESC", id, "ERROR", e.getCause().getClass().getSimpleName());
        }
      }
    }
  }
}
