import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;

/**
 * The Java kafka-clients 4.3 side of tests/groups/test_consumer_protocol_java.py.
 *
 *   member BOOTSTRAP GROUP TOPIC NAME   a group.protocol=consumer member that commits every
 *                                       batch synchronously and prints the JSON lines of
 *                                       consumer_member.py ("assigned", "recs"); it closes
 *                                       (leaving the group) when its standard input closes
 *   admin BOOTSTRAP GROUP...            describeConsumerGroups of the groups and listGroups
 *                                       (all, consumer only, classic only), as tab-separated
 *                                       GROUP / MEMBER / LIST lines
 */
public class KraitGroups {
  static double now() {
    return System.nanoTime() / 1e9; // CLOCK_MONOTONIC, as Python's time.monotonic()
  }

  static String quote(String s) {
    return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
  }

  static void member(String bootstrap, String group, String topic, String name) throws Exception {
    Properties p = new Properties();
    p.put("bootstrap.servers", bootstrap);
    p.put("group.id", group);
    p.put("client.id", name);
    p.put("group.protocol", "consumer");
    p.put("enable.auto.commit", "false");
    p.put("auto.offset.reset", "earliest");
    p.put("fetch.max.wait.ms", "100");
    p.put("metadata.max.age.ms", "1000");
    p.put("key.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
    p.put("value.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
    KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p);
    final boolean[] stop = {false};
    Thread stdin = new Thread(() -> {
      try {
        BufferedReader r = new BufferedReader(new InputStreamReader(System.in));
        while (r.readLine() != null) { }
      } catch (Exception e) { }
      synchronized (stop) { stop[0] = true; }
      consumer.wakeup();
    });
    stdin.setDaemon(true);
    stdin.start();
    consumer.subscribe(List.of(topic));
    String last = null;
    try {
      while (true) {
        synchronized (stop) { if (stop[0]) break; }
        ConsumerRecords<String, String> recs;
        try {
          recs = consumer.poll(Duration.ofMillis(100));
        } catch (WakeupException e) {
          break;
        }
        List<String> parts = new ArrayList<>();
        List<TopicPartition> owned = new ArrayList<>(consumer.assignment());
        owned.sort(Comparator.comparing(TopicPartition::topic).thenComparing(TopicPartition::partition));
        for (TopicPartition tp : owned) parts.add("[" + quote(tp.topic()) + "," + tp.partition() + "]");
        String now = String.join(",", parts);
        if (!now.equals(last)) {
          System.out.println("{\"t\":" + now() + ",\"ev\":\"assigned\",\"parts\":[" + now + "]}");
          last = now;
        }
        if (recs.isEmpty()) continue;
        Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
        List<String> out = new ArrayList<>();
        for (ConsumerRecord<String, String> r : recs) {
          out.add("[" + quote(r.topic()) + "," + r.partition() + "," + r.offset() + "," + quote(r.value()) + "]");
          next.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
        }
        boolean ok = true;
        try {
          consumer.commitSync(next);
        } catch (WakeupException e) {
          ok = false;
          stop[0] = true;
        } catch (Exception e) {
          ok = false;
          System.out.println("{\"t\":" + now() + ",\"ev\":\"error\",\"error\":" + quote("commit: " + e) + "}");
        }
        System.out.println("{\"t\":" + now() + ",\"ev\":\"recs\",\"recs\":[" + String.join(",", out)
            + "],\"committed\":" + ok + "}");
      }
    } finally {
      consumer.close();
      System.out.println("{\"t\":" + now() + ",\"ev\":\"closed\"}");
    }
  }

  static void out(Object... fields) {
    StringJoiner j = new StringJoiner("\t");
    for (Object f : fields) j.add(String.valueOf(f));
    System.out.println(j);
  }

  static String partitions(MemberAssignment a) {
    List<String> ps = new ArrayList<>();
    for (TopicPartition tp : a.topicPartitions()) ps.add(tp.topic() + ":" + tp.partition());
    Collections.sort(ps);
    return String.join(",", ps);
  }

  static void admin(String bootstrap, List<String> groups) throws Exception {
    Properties p = new Properties();
    p.put("bootstrap.servers", bootstrap);
    try (Admin admin = Admin.create(p)) {
      Map<String, ConsumerGroupDescription> described = admin.describeConsumerGroups(groups).all().get();
      for (String g : groups) {
        ConsumerGroupDescription d = described.get(g);
        out("GROUP", d.groupId(), d.type(), d.groupState(), d.partitionAssignor(), d.groupEpoch().orElse(-1),
            d.targetAssignmentEpoch().orElse(-1), d.members().size());
        for (MemberDescription m : d.members()) {
          out("MEMBER", d.groupId(), m.consumerId(), m.clientId(), partitions(m.assignment()),
              m.targetAssignment().map(KraitGroups::partitions).orElse("-"), m.memberEpoch().orElse(-1));
        }
      }
      Map<String, ListGroupsOptions> lists = new LinkedHashMap<>();
      lists.put("all", new ListGroupsOptions());
      lists.put("consumer", new ListGroupsOptions().withTypes(Set.of(GroupType.CONSUMER)));
      lists.put("classic", new ListGroupsOptions().withTypes(Set.of(GroupType.CLASSIC)));
      for (Map.Entry<String, ListGroupsOptions> e : lists.entrySet()) {
        for (GroupListing l : admin.listGroups(e.getValue()).all().get()) {
          out("LIST", e.getKey(), l.groupId(), l.type().map(Object::toString).orElse("-"), l.protocol(),
              l.groupState().map(Object::toString).orElse("-"));
        }
      }
    }
  }

  public static void main(String[] args) throws Exception {
    switch (args[0]) {
      case "member":
        member(args[1], args[2], args[3], args[4]);
        break;
      case "admin":
        admin(args[1], Arrays.asList(args).subList(2, args.length));
        break;
      default:
        throw new IllegalArgumentException(args[0]);
    }
  }
}
